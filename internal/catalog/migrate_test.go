package catalog

import (
	"context"
	"database/sql"
	"strconv"
	"testing"
	"testing/fstest"

	"github.com/idem-dev/idem/internal/report"
	"github.com/stretchr/testify/require"
)

func TestParseMigrations(t *testing.T) {
	t.Parallel()
	file := func(sql string) *fstest.MapFile { return &fstest.MapFile{Data: []byte(sql)} }
	cases := []struct {
		name  string
		files fstest.MapFS
		want  []string // files in order, when it parses
		isErr error    // a named error, when there is one
		names []string // what the error must name
	}{
		{name: "in order", files: fstest.MapFS{"m/0002_b.sql": file("B"), "m/0001_a.sql": file("A"), "m/0003_c_d.sql": file("C")},
			want: []string{"0001_a.sql", "0002_b.sql", "0003_c_d.sql"}},
		{name: "duplicate", files: fstest.MapFS{"m/0001_a.sql": file(""), "m/0002_b.sql": file(""), "m/0002_c.sql": file("")},
			isErr: ErrDuplicateVersion, names: []string{"0002_b.sql", "0002_c.sql"}},
		{name: "gap", files: fstest.MapFS{"m/0001_a.sql": file(""), "m/0003_c.sql": file("")},
			isErr: ErrMissingVersion, names: []string{"0001_a.sql", "0003_c.sql", "0002"}},
		{name: "no first", files: fstest.MapFS{"m/0002_b.sql": file("")},
			isErr: ErrMissingVersion, names: []string{"0002_b.sql", "0001"}},
		{name: "three digits", files: fstest.MapFS{"m/001_a.sql": file("")}, names: []string{"001_a.sql"}},
		{name: "upper case", files: fstest.MapFS{"m/0001_Init.sql": file("")}, names: []string{"0001_Init.sql"}},
		{name: "no name", files: fstest.MapFS{"m/0001.sql": file("")}, names: []string{"0001.sql"}},
		{name: "other file", files: fstest.MapFS{"m/0001_a.sql": file(""), "m/README.md": file("")}, names: []string{"README.md"}},
		{name: "down file", files: fstest.MapFS{"m/0001_a.down.sql": file("")}, names: []string{"0001_a.down.sql"}},
		{name: "folder", files: fstest.MapFS{"m/0001_a.sql/x": file("")}, names: []string{"0001_a.sql"}},
		{name: "empty", files: fstest.MapFS{"m/.keep": file("")}, names: []string{".keep"}},
		{name: "no folder", files: fstest.MapFS{}, names: []string{"m"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			ms, err := ParseMigrations(c.files, "m")
			if c.want != nil {
				require.NoError(t, err)
				got := make([]string, len(ms))
				for i, m := range ms {
					got[i] = m.File
					require.Equal(t, i+1, m.Version)
				}
				require.Equal(t, c.want, got)
				require.Equal(t, "B", ms[1].SQL)
				return
			}
			require.Error(t, err)
			if c.isErr != nil {
				require.ErrorIs(t, err, c.isErr)
			}
			for _, n := range c.names {
				require.Contains(t, err.Error(), n)
			}
		})
	}
}

// TestEmbeddedMigrations checks idem's own migrations: numbered from 0001
// without a gap, and the latest is what a new database records.
func TestEmbeddedMigrations(t *testing.T) {
	t.Parallel()
	ms, err := Migrations()
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(ms), 2)
	require.Equal(t, "0001_initial.sql", ms[0].File)
	require.Equal(t, "0002_ledger_batch_unique.sql", ms[1].File)
	latest, err := LatestVersion()
	require.NoError(t, err)
	require.Equal(t, ms[len(ms)-1].Version, latest)
}

// idemTables are the tables of the latest catalog version, and idemViews
// its views (tables before catalog version 9).
var (
	idemTables = []string{"checkpoints", "erasures", "files", "inputs", "jobs", "ledger", "meta", "migrations", "model_texts", "owners", "positions", "released", "retention", "runs", "snapshots", "verdicts"}
	idemViews  = []string{"commits", "packets"}
)

func tablesOf(t *testing.T, db Querier) []string {
	t.Helper()
	require.Equal(t, idemViews, rows(t, db, `SELECT view_name FROM duckdb_views() WHERE database_name = current_database() AND schema_name = 'idem' ORDER BY 1`))
	return rows(t, db, `SELECT table_name FROM duckdb_tables() WHERE database_name = current_database() AND schema_name = 'idem' ORDER BY 1`)
}

// ledgerUnique lists the unique constraints of idem.ledger.
func ledgerUnique(t *testing.T, db Querier) []string {
	t.Helper()
	return rows(t, db, `SELECT constraint_text FROM duckdb_constraints()
		WHERE database_name = current_database() AND schema_name = 'idem' AND table_name = 'ledger' AND constraint_type = 'UNIQUE'`)
}

// ledgerColumns lists idem.ledger's columns as 0001 made them: 0002 keeps
// them, in order.
func ledgerColumns(t *testing.T, db Querier) []string {
	t.Helper()
	return rows(t, db, `SELECT column_name || ' ' || data_type || ' ' || is_nullable FROM duckdb_columns()
		WHERE database_name = current_database() AND schema_name = 'idem' AND table_name = 'ledger' ORDER BY column_index`)
}

func TestMigrateNewDatabase(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := openMemory(t)
	var points []string
	require.NoError(t, Migrate(ctx, db, "new.duckdb", func(p string) { points = append(points, p) }))
	require.Equal(t, []string{FaultMigrateBeforeCommit, FaultMigrateAfterCommit}, points)
	latest, err := LatestVersion()
	require.NoError(t, err)
	v, err := Version(ctx, db)
	require.NoError(t, err)
	require.Equal(t, latest, v)
	require.Equal(t, idemTables, tablesOf(t, db))
	require.Equal(t, []string{"UNIQUE(job, batch_id)"}, ledgerUnique(t, db))
	require.Empty(t, rows(t, db, `SELECT index_name FROM duckdb_indexes()`))
	// Row 0 of idem.commits: the database's id, 32 hex digits.
	id := rows(t, db, `SELECT db_id FROM idem.commits WHERE seq = 0 AND kind = 'created'`)
	require.Len(t, id, 1)
	require.Regexp(t, `^[0-9a-f]{32}$`, id[0])
	require.Empty(t, rows(t, db, `SELECT * FROM idem.owners`))
	// The owners claim's variable does not outlive the migration.
	require.Equal(t, []string{"∅"}, rows(t, db, `SELECT getvariable('idem_had_owners')`))

	// Opening it again changes nothing and calls no fault point.
	points = nil
	require.NoError(t, Migrate(ctx, db, "new.duckdb", func(p string) { points = append(points, p) }))
	require.Empty(t, points)
	require.Equal(t, id, rows(t, db, `SELECT db_id FROM idem.commits`))
	require.Equal(t, []string{"catalog_version|" + strconv.Itoa(latest), "db_id|" + id[0]}, rows(t, db, `SELECT * FROM idem.meta WHERE key <> 'db_created_at' ORDER BY ALL`))

	// Two new databases have two ids.
	other := newCatalog(t)
	require.NotEqual(t, id, rows(t, other, `SELECT db_id FROM idem.commits`))
}

// TestMigrateOldDatabase migrates databases of the versions before: one of
// catalog version 1 without the row (release e77bdc9), one from before
// idem.owners and idem.checkpoints, and one recorded at version 1.
func TestMigrateOldDatabase(t *testing.T) {
	t.Parallel()
	ms, err := Migrations()
	require.NoError(t, err)
	cases := []struct {
		name   string
		before func(t *testing.T, db *sql.DB)
		owners []string
	}{
		{name: "e77bdc9", before: func(t *testing.T, db *sql.DB) {
			exec(t, db, ms[0].SQL, `INSERT INTO idem.owners VALUES ('main.t', 'a', current_timestamp)`)
		}, owners: []string{"main.t|a"}},
		{name: "before owners", before: func(t *testing.T, db *sql.DB) {
			exec(t, db, ms[0].SQL, `DROP TABLE idem.owners`, `DROP TABLE idem.checkpoints`)
		}, owners: []string{"idem.a__history|a", "idem.b__history|b", "main.t|a", "main.t_outcomes|a", "main.u|b"}},
		{name: "version 1", before: func(t *testing.T, db *sql.DB) {
			exec(t, db, ms[0].SQL, `INSERT INTO idem.meta VALUES ('catalog_version', '1')`)
		}, owners: []string{}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			db := openMemory(t)
			c.before(t, db)
			// Two jobs with targets and snapshots; b committed first but
			// only a's target has an _outcomes table beside it.
			exec(t, db,
				`INSERT INTO idem.jobs (job, target, snapshot) VALUES ('a', 't', 2), ('b', 'u', 1)`,
				`INSERT INTO idem.snapshots (job, snapshot, parent, kind, committed_at) VALUES ('a', 1, 0, 'loaded', TIMESTAMP '2025-01-02'), ('b', 1, 0, 'loaded', TIMESTAMP '2025-01-01')`,
				`INSERT INTO idem.ledger VALUES ('a', 'b1', 'd', 'i', NULL, NULL, 1, '{}', 1, NULL), ('a', 'b2', 'd', 'i', NULL, NULL, 1, '{}', 2, NULL)`,
				`CREATE TABLE t (x INT)`, `CREATE TABLE t_outcomes (x INT)`, `CREATE TABLE u (x INT)`, `CREATE TABLE v_outcomes (x INT)`)
			id := rows(t, db, `SELECT db_id FROM idem.commits`)
			cols := ledgerColumns(t, db)
			require.Len(t, cols, 10)
			require.NoError(t, Migrate(ctx, db, "old.duckdb", nil))
			require.Equal(t, cols, ledgerColumns(t, db))
			v, err := Version(ctx, db)
			require.NoError(t, err)
			require.Equal(t, ms[len(ms)-1].Version, v)
			require.Equal(t, idemTables, tablesOf(t, db))
			require.Equal(t, []string{"UNIQUE(job, batch_id)"}, ledgerUnique(t, db))
			require.Equal(t, id, rows(t, db, `SELECT db_id FROM idem.commits`), "the database keeps its id")
			require.Equal(t, c.owners, rows(t, db, `SELECT name, job FROM idem.owners ORDER BY ALL`))
			require.Equal(t, []string{"a|b1", "a|b2"}, rows(t, db, `SELECT job, batch_id FROM idem.ledger ORDER BY ALL`))
			// The constraint holds: a batch applies once.
			_, err = db.Exec(`INSERT INTO idem.ledger VALUES ('a', 'b1', 'd2', 'i', NULL, NULL, 1, '{}', 3, NULL)`)
			require.ErrorContains(t, err, "violates unique constraint")
		})
	}
}

// snapshotAll is every table of the database as text: its rows in order.
func snapshotAll(t *testing.T, db Querier) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	for _, name := range rows(t, db, `SELECT schema_name || '.' || table_name FROM duckdb_tables() WHERE database_name = current_database() ORDER BY 1`) {
		out[name] = rows(t, db, "SELECT * FROM "+name+" ORDER BY ALL")
	}
	out["constraints"] = rows(t, db, `SELECT table_name, constraint_text FROM duckdb_constraints() WHERE database_name = current_database() ORDER BY ALL`)
	return out
}

// TestMigrateRefusesOrRollsBack: a database of a newer catalog version is
// refused, and a migration that fails leaves the database at its version,
// every table as it was.
func TestMigrateRefusesOrRollsBack(t *testing.T) {
	t.Parallel()
	ms, err := Migrations()
	require.NoError(t, err)
	latest := ms[len(ms)-1].Version
	broken := append(append([]Migration{}, ms...), Migration{Version: latest + 1, File: "9999_broken.sql",
		SQL: `CREATE TABLE idem.extra (x INT); INSERT INTO idem.jobs (job) VALUES ('x'); SELECT no_such_column FROM idem.extra`})
	cases := []struct {
		name   string
		setup  []string
		list   []Migration
		check  func(t *testing.T, err error)
		points []string
	}{
		{name: "newer", setup: []string{ms[0].SQL, `INSERT INTO idem.meta VALUES ('catalog_version', '` + strconv.Itoa(latest+1) + `')`},
			list: ms, check: func(t *testing.T, err error) {
				var ve *VersionError
				require.ErrorAs(t, err, &ve)
				require.ErrorIs(t, err, report.ErrRefused)
				require.Equal(t, 3, report.ExitCode(err))
				require.EqualError(t, err, "database db.duckdb has catalog version "+strconv.Itoa(latest+1)+"; this idem reads up to "+strconv.Itoa(latest)+": upgrade idem")
			}},
		{name: "duplicate batch", setup: []string{ms[0].SQL,
			`INSERT INTO idem.ledger VALUES ('j', 'b', 'd', 'i', NULL, NULL, 1, '{}', 1, NULL), ('j', 'b', 'd', 'i', NULL, NULL, 1, '{}', 2, NULL)`},
			list: ms, points: []string{}, check: func(t *testing.T, err error) {
				require.ErrorContains(t, err, "catalog version 2 (0002_ledger_batch_unique.sql)")
				require.ErrorContains(t, err, "idem.ledger holds batch b of job j 2 times")
			}},
		{name: "failing step", setup: []string{ms[0].SQL, `INSERT INTO idem.meta VALUES ('catalog_version', '1')`},
			list: broken, points: []string{}, check: func(t *testing.T, err error) {
				require.ErrorContains(t, err, "9999_broken.sql")
				require.ErrorContains(t, err, "no_such_column")
			}},
		{name: "bad version row", setup: []string{ms[0].SQL, `INSERT INTO idem.meta VALUES ('catalog_version', 'two')`},
			list: ms, check: func(t *testing.T, err error) {
				require.ErrorContains(t, err, `catalog_version rows ["two"]`)
			}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			db := openMemory(t)
			exec(t, db, c.setup...)
			before := snapshotAll(t, db)
			points := []string{}
			err := migrate(ctx, db, "db.duckdb", c.list, func(p string) { points = append(points, p) })
			require.Error(t, err)
			c.check(t, err)
			require.Equal(t, before, snapshotAll(t, db), "nothing changed")
			require.Empty(t, points, "no fault point before a failure")
			if c.name == "newer" {
				require.Equal(t, err, CheckVersion(ctx, db, "db.duckdb"))
			}
		})
	}
}

// TestMigratePending applies the migrations after a database's version
// only: a database at version 1 whose 0001 would now fail is not given it
// again.
func TestMigratePending(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := openMemory(t)
	ms, err := Migrations()
	require.NoError(t, err)
	exec(t, db, ms[0].SQL, `INSERT INTO idem.meta VALUES ('catalog_version', '1')`)
	// It records 0001 by the embedded file's name and sha256, which the
	// database took.
	list := append([]Migration{{Version: 1, File: ms[0].File, SQL: "SELECT error('0001 ran again')", SHA256: ms[0].SHA256}}, ms[1:]...)
	require.NoError(t, migrate(ctx, db, "db.duckdb", list, nil))
	v, err := Version(ctx, db)
	require.NoError(t, err)
	require.Equal(t, ms[len(ms)-1].Version, v)
	require.NoError(t, CheckVersion(ctx, db, "db.duckdb"))
	// An older database reads as it is.
	old := openMemory(t)
	exec(t, old, ms[0].SQL)
	require.NoError(t, CheckVersion(ctx, old, "old.duckdb"))
	empty := openMemory(t)
	require.NoError(t, CheckVersion(ctx, empty, "empty.duckdb"))
	v, err = Version(ctx, empty)
	require.NoError(t, err)
	require.Zero(t, v)
}
