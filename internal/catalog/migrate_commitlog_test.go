package catalog

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// version7 is an in-memory database of catalog version 7, made by the
// embedded migrations 0001-0007, with rows in stmts.
func version7(t *testing.T, stmts ...string) *sql.DB {
	t.Helper()
	ms, err := Migrations()
	require.NoError(t, err)
	db := openMemory(t)
	for _, m := range ms[:7] {
		exec(t, db, m.SQL)
	}
	exec(t, db, `INSERT INTO idem.meta (key, value) VALUES ('catalog_version', '7')`)
	exec(t, db, stmts...)
	return db
}

// TestMigrateCommitLog migrates a database of catalog version 7 to the
// commit log (0009): each commit of idem.commits lands on the run log row
// its transaction wrote (one without such a row becomes a row of its
// own), row 0 in idem.meta, each packet in its snapshot row; idem.commits
// and idem.packets read as before, and the next commit takes the next
// sequence number.
func TestMigrateCommitLog(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := version7(t,
		`INSERT INTO idem.runs (job, run_at, decision, changed, snapshot) VALUES
		 ('a', TIMESTAMP '2026-01-01 10:00:00.123456', 'loaded', '[]', 1),
		 ('a', TIMESTAMP '2026-01-01 11:00:00', 'skipped', '[]', 1),
		 ('b', TIMESTAMP '2026-01-01 12:00:00', 'fenced', '[]', 0),
		 ('a', TIMESTAMP '2026-01-01 13:00:00', 'loaded', '[]', 2)`,
		`INSERT INTO idem.commits (db_id, seq, job, kind, committed_at) SELECT db_id, 1, 'a', 'loaded', TIMESTAMP '2026-01-01 10:00:00.123456' FROM idem.commits WHERE seq = 0`,
		`INSERT INTO idem.commits (db_id, seq, job, kind, committed_at) SELECT db_id, 2, 'b', 'fenced', TIMESTAMP '2026-01-01 12:00:00' FROM idem.commits WHERE seq = 0`,
		`INSERT INTO idem.commits (db_id, seq, job, kind, committed_at) SELECT db_id, 3, 'c', 'expired', TIMESTAMP '2026-01-01 12:30:00' FROM idem.commits WHERE seq = 0`,
		`INSERT INTO idem.commits (db_id, seq, job, kind, committed_at) SELECT db_id, 4, 'a', 'loaded', TIMESTAMP '2026-01-01 13:00:00' FROM idem.commits WHERE seq = 0`,
		`INSERT INTO idem.snapshots (job, snapshot, parent, kind, committed_at) VALUES
		 ('a', 1, 0, 'loaded', TIMESTAMP '2026-01-01 10:00:00.123456'), ('a', 2, 1, 'loaded', TIMESTAMP '2026-01-01 13:00:00')`,
		`INSERT INTO idem.packets (job, snapshot, packet, recorded_at) VALUES ('a', 2, '{"job":"a","snapshot":2}', TIMESTAMP '2026-01-01 13:00:00')`,
	)
	commits := rows(t, db, `SELECT * FROM idem.commits ORDER BY seq`)
	require.Len(t, commits, 5)
	packets := rows(t, db, `SELECT * FROM idem.packets ORDER BY ALL`)
	snapshots := rows(t, db, `SELECT * FROM idem.snapshots ORDER BY ALL`)

	require.NoError(t, Migrate(ctx, db, "v7.duckdb", nil))
	require.Equal(t, commits, rows(t, db, `SELECT * FROM idem.commits ORDER BY seq`), "idem.commits reads as before")
	require.Equal(t, packets, rows(t, db, `SELECT * FROM idem.packets ORDER BY ALL`), "idem.packets reads as before")
	require.Equal(t, snapshots, rows(t, db, `SELECT * EXCLUDE (packet) FROM idem.snapshots ORDER BY ALL`))
	require.Equal(t, []string{
		"a|loaded|1", "a|skipped|∅", "b|fenced|2", "a|loaded|4",
		"c|expired|3|a commit idem.commits recorded without a run log row (moved here by catalog version 9)",
	}, rows(t, db, `SELECT concat_ws('|', job, decision, coalesce(CAST(seq AS VARCHAR), '∅'), message) FROM idem.runs ORDER BY rowid`))
	require.Equal(t, []string{"1"}, rows(t, db, `SELECT count(DISTINCT db_id) FROM idem.runs`))
	require.NoError(t, CheckWAL(ctx, db, "v7.duckdb", "v7.duckdb.wal"))
	log, err := ReadLog(ctx, db, "a")
	require.NoError(t, err)
	require.Len(t, log, 3)

	tx := begin(t, db)
	require.NoError(t, InsertRun(ctx, tx, RunRow{Job: "a", Decision: "fenced", Changed: "[]", Commit: true}))
	require.NoError(t, tx.Commit())
	require.Equal(t, []string{"5|a|fenced"}, rows(t, db, `SELECT seq, job, kind FROM idem.commits WHERE seq > 4`))
	require.NoError(t, CheckWAL(ctx, db, "v7.duckdb", "v7.duckdb.wal"))
}

// TestMigrateCommitLogRefusesOrphanPacket: a packet without its snapshot
// row (written outside idem) is named, and the database is left at
// catalog version 7, unchanged.
func TestMigrateCommitLogRefusesOrphanPacket(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := version7(t, `INSERT INTO idem.packets (job, snapshot, packet) VALUES ('a', 3, '{}')`)
	before := snapshotAll(t, db)
	err := Migrate(ctx, db, "v7.duckdb", nil)
	require.ErrorContains(t, err, "0009_commit_log.sql")
	require.ErrorContains(t, err, "idem.packets holds a release packet of snapshot 3 of job a, which idem.snapshots does not hold")
	require.Equal(t, before, snapshotAll(t, db))
}

// TestCheckpointKeepsNoPacket: a checkpoint's copy of the job's snapshot
// rows leaves their release packets out: an erasure scrubs a packet's key
// bounds in idem.snapshots, and a checkpoint file must not keep another
// copy of them.
func TestCheckpointKeepsNoPacket(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := newCatalog(t)
	exec(t, db, `INSERT INTO idem.snapshots (job, snapshot, parent, kind, packet) VALUES ('a', 1, 0, 'loaded', '{"bounds":"erased-key"}')`)
	out := filepath.Join(t.TempDir(), "snapshots.parquet")
	require.NoError(t, CopyIdemRows(ctx, db, "snapshots", "a", out))
	require.Equal(t, []string{"1"}, rows(t, db, `SELECT count(*) FROM read_parquet(?)`, out))
	require.Equal(t, []string{"0"}, rows(t, db, `SELECT count(*) FROM parquet_schema(?) WHERE name = 'packet'`, out))
}
