package catalog

import (
	"context"
	"database/sql"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

var updateFresh = flag.Bool("update", false, "rewrite fresh.sql from the migrations")

// freshTail is what fresh.sql adds to the tables and views it copies from
// a migrated database: the rows a new database starts with, which 0001 and
// 0009 write (its id and creation time; the migrations' and the version's
// rows are Migrate's own).
const freshTail = `INSERT INTO idem.meta (key, value) SELECT 'db_id', md5(gen_random_uuid()::VARCHAR);
INSERT INTO idem.meta (key, value) SELECT 'db_created_at', CAST(CAST(current_timestamp AS TIMESTAMP) AS VARCHAR);
`

// catalogDump is every table's and view's definition, the constraints,
// and every idem table's rows (the database's id and creation time, and
// when each migration was applied, named only).
func catalogDump(t *testing.T, db *sql.DB) string {
	t.Helper()
	var b strings.Builder
	for _, q := range []string{
		`SELECT schema_name, table_name, sql FROM duckdb_tables() WHERE database_name = current_database() ORDER BY ALL`,
		`SELECT schema_name, view_name, sql FROM duckdb_views() WHERE database_name = current_database() AND NOT internal ORDER BY ALL`,
		`SELECT schema_name, table_name, constraint_type, constraint_text, constraint_column_names FROM duckdb_constraints() WHERE database_name = current_database() ORDER BY ALL`,
		`SELECT sql FROM duckdb_indexes() WHERE database_name = current_database() ORDER BY ALL`,
		`SELECT sequence_name FROM duckdb_sequences() WHERE database_name = current_database() ORDER BY ALL`,
		`SELECT key, CASE key WHEN 'db_id' THEN CAST(length(value) AS VARCHAR) WHEN 'db_created_at' THEN CAST(TRY_CAST(value AS TIMESTAMP) IS NOT NULL AS VARCHAR) ELSE value END FROM idem.meta ORDER BY ALL`,
		`SELECT version, file, sha256, applied_at IS NOT NULL FROM idem.migrations ORDER BY ALL`,
	} {
		fmt.Fprintln(&b, strings.Join(rows(t, db, q), "\n"))
	}
	for _, table := range rows(t, db, `SELECT table_name FROM duckdb_tables() WHERE database_name = current_database() AND schema_name = 'idem' AND table_name NOT IN ('meta', 'migrations') ORDER BY ALL`) {
		fmt.Fprintf(&b, "%s: %d rows\n", table, one[int](t, db, "SELECT count(*) FROM idem."+table))
	}
	return b.String()
}

// TestFreshSchema: a new database made from fresh.sql holds what one made
// by every migration holds (definitions, constraints, rows), is at the
// latest catalog version with every migration recorded, and fresh.sql is
// the one generated from the migrations. A database from before catalog
// versions (an idem schema without a version) still takes the migrations.
func TestFreshSchema(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ms, err := Migrations()
	require.NoError(t, err)
	open := func(name string) *sql.DB {
		path := filepath.Join(t.TempDir(), name+".duckdb")
		db, err := sql.Open("duckdb", path)
		require.NoError(t, err)
		t.Cleanup(func() { db.Close() })
		db.SetMaxOpenConns(1)
		exec(t, db, "SET TimeZone = 'UTC'")
		return db
	}
	migrated := open("migrated")
	require.NoError(t, migrate(ctx, migrated, "migrated", ms, nil))

	want := fmt.Sprintf(freshHeader, ms[len(ms)-1].Version) + "CREATE SCHEMA idem;\n" +
		strings.Join(rows(t, migrated, `SELECT sql FROM duckdb_tables() WHERE database_name = current_database() ORDER BY schema_name, table_name`), "\n") + "\n" +
		strings.Join(rows(t, migrated, `SELECT sql FROM duckdb_views() WHERE database_name = current_database() AND NOT internal ORDER BY schema_name, view_name`), "\n") + "\n" +
		freshTail
	if *updateFresh {
		require.NoError(t, os.WriteFile("fresh.sql", []byte(want), 0o644))
		freshSQL = want
	}
	require.Equal(t, want, freshSQL, "fresh.sql is not the schema the migrations make: go test ./internal/catalog -run TestFreshSchema -update")
	require.NotEmpty(t, freshSchema(ms))

	fresh := open("fresh")
	require.NoError(t, Migrate(ctx, fresh, "fresh", nil))
	require.Equal(t, catalogDump(t, migrated), catalogDump(t, fresh))
	v, err := Version(ctx, fresh)
	require.NoError(t, err)
	require.Equal(t, ms[len(ms)-1].Version, v)
	require.Len(t, one[string](t, fresh, `SELECT value FROM idem.meta WHERE key = 'db_id'`), 32)
	require.NotEqual(t, one[string](t, migrated, `SELECT value FROM idem.meta WHERE key = 'db_id'`),
		one[string](t, fresh, `SELECT value FROM idem.meta WHERE key = 'db_id'`), "two databases share an id")
	require.NoError(t, Migrate(ctx, fresh, "fresh", nil), "a second open")

	// An idem schema without a catalog version is a database of an older
	// release: 0001 claims its tables' owners, so it takes the migrations.
	old := open("old")
	exec(t, old, `CREATE SCHEMA idem`, `CREATE TABLE idem.meta (key VARCHAR NOT NULL, value VARCHAR)`,
		`CREATE TABLE idem.jobs (job VARCHAR NOT NULL, pipeline VARCHAR, mode VARCHAR, target VARCHAR, job_key VARCHAR, parts VARCHAR, snapshot BIGINT NOT NULL DEFAULT 0, cursor BIGINT NOT NULL DEFAULT 0, epoch BIGINT NOT NULL DEFAULT 1, updated_at TIMESTAMP)`,
		`INSERT INTO idem.jobs (job, target, snapshot) VALUES ('j', 't', 1)`)
	require.NoError(t, Migrate(ctx, old, "old", nil))
	require.Equal(t, []string{"idem.j__history|j", "main.t|j"}, rows(t, old, `SELECT name, job FROM idem.owners ORDER BY ALL`))
}
