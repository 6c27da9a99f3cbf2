package catalog

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// bootstrapSQL creates idem's own tables. It runs in its own transaction,
// outside any data transaction, and only when something is missing.
const bootstrapSQL = `
CREATE SCHEMA IF NOT EXISTS idem;
CREATE TABLE IF NOT EXISTS idem.meta (key VARCHAR NOT NULL, value VARCHAR);
CREATE TABLE IF NOT EXISTS idem.jobs (
    job         VARCHAR NOT NULL,
    pipeline    VARCHAR,
    mode        VARCHAR,
    target      VARCHAR,
    job_key     VARCHAR,
    parts       VARCHAR,
    snapshot    BIGINT NOT NULL DEFAULT 0,
    cursor      BIGINT NOT NULL DEFAULT 0,
    epoch       BIGINT NOT NULL DEFAULT 1,
    updated_at  TIMESTAMP
);
CREATE TABLE IF NOT EXISTS idem.released (
    pipeline    VARCHAR NOT NULL,
    kind        VARCHAR NOT NULL,
    version     INTEGER NOT NULL,
    sha256      VARCHAR NOT NULL,
    recorded_at TIMESTAMP
);
CREATE TABLE IF NOT EXISTS idem.ledger (
    job          VARCHAR NOT NULL,
    batch_id     VARCHAR NOT NULL,
    digest       VARCHAR NOT NULL,
    input_digest VARCHAR NOT NULL,
    from_pos     BIGINT,
    to_pos       BIGINT,
    rows_in      BIGINT NOT NULL,
    outcomes     VARCHAR NOT NULL,
    snapshot     BIGINT NOT NULL,
    committed_at TIMESTAMP
);
CREATE TABLE IF NOT EXISTS idem.snapshots (
    job          VARCHAR NOT NULL,
    snapshot     BIGINT NOT NULL,
    parent       BIGINT NOT NULL,
    kind         VARCHAR NOT NULL,
    batch_id     VARCHAR,
    job_key      VARCHAR,
    parts        VARCHAR,
    inputs       VARCHAR,
    rows_in      BIGINT,
    rows_out     BIGINT,
    outcomes     VARCHAR,
    columns      VARCHAR,
    key_columns  VARCHAR,
    committed_at TIMESTAMP
);
CREATE TABLE IF NOT EXISTS idem.runs (
    job       VARCHAR NOT NULL,
    run_at    TIMESTAMP NOT NULL,
    batch_id  VARCHAR,
    decision  VARCHAR NOT NULL,
    changed   VARCHAR,
    rows_in   BIGINT,
    outcomes  VARCHAR,
    snapshot  BIGINT,
    cursor    BIGINT,
    epoch     BIGINT,
    message   VARCHAR
);
CREATE TABLE IF NOT EXISTS idem.inputs (
    sha256     VARCHAR NOT NULL,
    bytes      BIGINT NOT NULL,
    stored_at  TIMESTAMP
);
CREATE TABLE IF NOT EXISTS idem.files (
    job          VARCHAR NOT NULL,
    path         VARCHAR NOT NULL,
    sha256       VARCHAR NOT NULL,
    bytes        BIGINT NOT NULL,
    batch_id     VARCHAR NOT NULL,
    snapshot     BIGINT NOT NULL,
    committed_at TIMESTAMP
);
CREATE TABLE IF NOT EXISTS idem.commits (
    db_id        VARCHAR NOT NULL,
    seq          BIGINT NOT NULL,
    job          VARCHAR,
    kind         VARCHAR NOT NULL,
    committed_at TIMESTAMP
);
CREATE TABLE IF NOT EXISTS idem.owners (
    name       VARCHAR NOT NULL,
    job        VARCHAR NOT NULL,
    claimed_at TIMESTAMP
);
CREATE TABLE IF NOT EXISTS idem.packets (
    job         VARCHAR NOT NULL,
    snapshot    BIGINT NOT NULL,
    packet      VARCHAR NOT NULL,
    recorded_at TIMESTAMP
);
CREATE TABLE IF NOT EXISTS idem.retention (
    job          VARCHAR NOT NULL,
    oldest_kept  BIGINT NOT NULL,
    inputs_from  BIGINT NOT NULL,
    expired_at   TIMESTAMP
);
CREATE TABLE IF NOT EXISTS idem.positions (
    job        VARCHAR NOT NULL,
    partition  VARCHAR NOT NULL,
    next       BIGINT NOT NULL,
    snapshot   BIGINT NOT NULL,
    updated_at TIMESTAMP
);
CREATE TABLE IF NOT EXISTS idem.erasures (
    job        VARCHAR NOT NULL,
    key        VARCHAR NOT NULL,
    position   BIGINT,
    snapshot   BIGINT,
    erased_at  TIMESTAMP
);
CREATE TABLE IF NOT EXISTS idem.checkpoints (
    job        VARCHAR NOT NULL,
    snapshot   BIGINT NOT NULL,
    sha256     VARCHAR NOT NULL,
    bytes      BIGINT NOT NULL,
    files      VARCHAR NOT NULL,
    created_at TIMESTAMP
);
`

// idemTables is what bootstrap must find for an up-to-date database.
var idemTables = []string{"meta", "jobs", "released", "ledger", "snapshots", "runs", "inputs", "erasures", "files", "commits", "owners", "packets", "retention", "checkpoints", "positions"}

// Bootstrap creates idem's own tables in the database at path when any is
// missing, in a transaction of its own, and checkpoints.
func Bootstrap(ctx context.Context, db *sql.DB, path string) error {
	var n int
	err := db.QueryRowContext(ctx,
		`SELECT count(*) FROM duckdb_tables() WHERE database_name = current_database() AND schema_name = 'idem' AND table_name IN (SELECT unnest(?::VARCHAR[]))`,
		idemTables).Scan(&n)
	if err != nil {
		return fmt.Errorf("inspect idem tables in %s: %w", path, err)
	}
	if n == len(idemTables) {
		return nil
	}
	hadOwners, err := TableExists(ctx, db, "idem", "owners")
	if err != nil {
		return err
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("create idem tables in %s: %w", path, err)
	}
	if _, err := tx.ExecContext(ctx, bootstrapSQL); err != nil {
		return errors.Join(fmt.Errorf("create idem tables in %s: %w", path, err), tx.Rollback())
	}
	// Row 0 of idem.commits holds the database's own id (see RecordCommit).
	if _, err := tx.ExecContext(ctx, `INSERT INTO idem.commits
		SELECT ?, 0, NULL, 'created', current_timestamp WHERE NOT EXISTS (SELECT 1 FROM idem.commits)`, newDatabaseID()); err != nil {
		return errors.Join(fmt.Errorf("create idem tables in %s: %w", path, err), tx.Rollback())
	}
	if !hadOwners {
		// A database from before idem.owners: its jobs claim their tables.
		if _, err := tx.ExecContext(ctx, claimOwnersSQL); err != nil {
			return errors.Join(fmt.Errorf("record the owners of the tables in %s: %w", path, err), tx.Rollback())
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("create idem tables in %s: %w", path, err)
	}
	if _, err := db.ExecContext(ctx, "CHECKPOINT"); err != nil {
		return fmt.Errorf("checkpoint %s: %w", path, err)
	}
	return nil
}
