package run

import (
	"context"
	"database/sql"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idem-dev/idem/internal/sqltext"
)

// driverOf returns the connection underneath conn.
func driverOf(t *testing.T, conn *sql.Conn) *cachedConn {
	t.Helper()
	var c *cachedConn
	require.NoError(t, conn.Raw(func(dc any) error {
		var ok bool
		c, ok = dc.(*cachedConn)
		require.True(t, ok, "a pool connection keeps its statements")
		return nil
	}))
	return c
}

func memPool(t *testing.T) *sql.DB {
	t.Helper()
	db, err := OpenMemory(context.Background(), "")
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	return db
}

// takeConn takes a connection of db and the kept connection underneath it.
func takeConn(t *testing.T, db *sql.DB) (*sql.Conn, *cachedConn) {
	t.Helper()
	conn, err := db.Conn(context.Background())
	require.NoError(t, err)
	return conn, driverOf(t, conn)
}

// memConn is a connection of a new in-memory pool, closed with the test.
func memConn(t *testing.T) *sql.Conn {
	t.Helper()
	conn, _ := takeConn(t, memPool(t))
	t.Cleanup(func() { conn.Close() })
	return conn
}

// TestKeptStatementsSeeChanges: a text run again from its kept statement
// reads what changed since it was prepared: rows, columns, a table made
// again with other types, a variable, a parameter of another type.
func TestKeptStatementsSeeChanges(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	conn := memConn(t)
	exec := func(q string, args ...any) {
		t.Helper()
		_, err := conn.ExecContext(ctx, q, args...)
		require.NoError(t, err, q)
	}
	one := func(q string, args ...any) any {
		t.Helper()
		var v any
		require.NoError(t, conn.QueryRowContext(ctx, q, args...).Scan(&v), q)
		return v
	}
	exec("CREATE TABLE t (a INTEGER)")
	const count = "SELECT count(*) FROM t"
	for i := range 4 {
		require.EqualValues(t, i, one(count))
		exec("INSERT INTO t VALUES (?)", i)
	}
	require.Contains(t, driverOf(t, conn).stmts, count, "a text seen twice is kept")

	const star = "SELECT * FROM t ORDER BY ALL LIMIT 1"
	require.EqualValues(t, 0, one(star))
	require.EqualValues(t, 0, one(star))
	exec("CREATE OR REPLACE TABLE t AS SELECT 'x' AS a")
	require.Equal(t, "x", one(star), "a table made again with another type")

	const v = "SELECT getvariable('v')"
	for _, want := range []int64{1, 2, 3} {
		exec("SET VARIABLE v = ?", want)
		require.EqualValues(t, want, one(v))
	}
	const param = "SELECT CAST(? AS VARCHAR)"
	require.Equal(t, "1", one(param, 1))
	require.Equal(t, "1", one(param, 1))
	require.Equal(t, "two", one(param, "two"))

	// A text of two statements is never kept: each run runs both.
	exec("CREATE TABLE u (a INTEGER)")
	for range 3 {
		exec("INSERT INTO u VALUES (1); INSERT INTO u VALUES (2)")
	}
	require.EqualValues(t, 6, one("SELECT count(*) FROM u"))
	// A plain text is kept when first seen; a dollar-quoted one only once
	// DuckDB counted it, on its second sighting.
	const plain, dollar = "SELECT 'a;b' AS s", "SELECT $$a;b$$ AS s"
	require.Equal(t, "a;b", one(plain))
	require.Contains(t, driverOf(t, conn).stmts, plain)
	require.Equal(t, "a;b", one(dollar))
	require.NotContains(t, driverOf(t, conn).stmts, dollar)
	require.Equal(t, "a;b", one(dollar))
	require.Contains(t, driverOf(t, conn).stmts, dollar)
	const smuggled = "SELECT $$a$$ AS s; INSERT INTO u VALUES (3)"
	for range 3 {
		exec(smuggled)
	}
	require.EqualValues(t, 3, one("SELECT count(*) FROM u WHERE a = 3"), "each run of a two-statement text runs both")
	// A kept CREATE TABLE AS WITH ... over a temp view made again before
	// each run (as a pipeline's stage step reads its input) binds the
	// view of the run.
	const stage = "CREATE OR REPLACE TEMP TABLE staged AS WITH raw AS (SELECT * FROM input) SELECT a FROM raw"
	for i := range 4 {
		exec(fmt.Sprintf("CREATE OR REPLACE TEMP VIEW input AS SELECT %d AS a", i))
		exec(stage)
		require.EqualValues(t, i, one("SELECT a FROM staged"))
	}
	require.Contains(t, driverOf(t, conn).stmts, stage)

	// A CREATE VIEW is never kept: DuckDB 2.0.0, run again from a
	// prepared statement whose last run was rolled back, makes a view
	// without a query, and reading it is an INTERNAL error.
	const view = "CREATE OR REPLACE TEMP VIEW input AS SELECT a FROM range(3) AS r(a)"
	for range 3 {
		tx, err := conn.BeginTx(ctx, nil)
		require.NoError(t, err)
		_, err = tx.ExecContext(ctx, view)
		require.NoError(t, err)
		require.NoError(t, tx.Rollback())
	}
	exec(view)
	require.EqualValues(t, 0, one("SELECT min(a) FROM input"))
	require.NotContains(t, driverOf(t, conn).stmts, view)
}

// TestKeptConnectionsCarryNoSession: a connection goes back to the pool and
// is reused, but the next user sees none of the temp tables, views and
// variables the last one left; a connection that changed a session
// setting, or whose transaction rolled back, is not reused at all.
func TestKeptConnectionsCarryNoSession(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := memPool(t)
	db.SetMaxIdleConns(1)

	conn, first := takeConn(t, db)
	for _, q := range []string{
		"CREATE TEMP TABLE scratch AS SELECT 1 AS a",
		"CREATE TEMP VIEW seen AS SELECT 2 AS b",
		"SET VARIABLE left_over = 42",
	} {
		_, err := conn.ExecContext(ctx, q)
		require.NoError(t, err, q)
	}
	require.NoError(t, conn.Close())

	conn, again := takeConn(t, db)
	require.Same(t, first, again, "the connection is reused")
	var temps int
	require.NoError(t, conn.QueryRowContext(ctx, `SELECT count(*) FROM duckdb_tables() WHERE database_name = 'temp'`).Scan(&temps))
	require.Zero(t, temps)
	require.NoError(t, conn.QueryRowContext(ctx, `SELECT count(*) FROM duckdb_views() WHERE database_name = 'temp' AND NOT internal`).Scan(&temps))
	require.Zero(t, temps)
	var left sql.NullInt64
	require.NoError(t, conn.QueryRowContext(ctx, `SELECT getvariable('left_over')`).Scan(&left))
	require.False(t, left.Valid, "a variable of the last user")

	// A session setting retires the connection.
	_, err := conn.ExecContext(ctx, "SET enable_progress_bar = true")
	require.NoError(t, err)
	require.NoError(t, conn.Close())
	conn, other := takeConn(t, db)
	require.NotSame(t, first, other, "a connection with a setting of its own is closed")
	var progress bool
	require.NoError(t, conn.QueryRowContext(ctx, `SELECT current_setting('enable_progress_bar')`).Scan(&progress))
	require.False(t, progress)

	// So does a rollback, and a failed statement.
	tx, err := conn.BeginTx(ctx, nil)
	require.NoError(t, err)
	_, err = tx.ExecContext(ctx, "CREATE OR REPLACE TEMP VIEW input AS SELECT 1 AS a")
	require.NoError(t, err)
	require.NoError(t, tx.Rollback())
	require.NoError(t, conn.Close())
	conn, third := takeConn(t, db)
	require.NotSame(t, other, third, "a connection that rolled back is closed")
	_, err = conn.ExecContext(ctx, "SELECT * FROM no_such_table")
	require.Error(t, err)
	require.NoError(t, conn.Close())
	conn, fourth := takeConn(t, db)
	require.NotSame(t, third, fourth, "a connection whose statement failed is closed")
	require.NoError(t, conn.Close())
}

// TestKeptConnectionsSeeEveryStatement: in a text of several statements,
// what a statement after the first leaves is cleared or retires the
// connection as it would first.
func TestKeptConnectionsSeeEveryStatement(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := memPool(t)
	db.SetMaxIdleConns(1)

	conn, first := takeConn(t, db)
	_, err := conn.ExecContext(ctx, "SELECT 1; CREATE TEMP TABLE hidden AS SELECT 1 AS a; SET VARIABLE hidden_too = 1")
	require.NoError(t, err)
	require.NoError(t, conn.Close())
	conn, again := takeConn(t, db)
	require.Same(t, first, again, "the connection is reused")
	var temps int
	require.NoError(t, conn.QueryRowContext(ctx, `SELECT count(*) FROM duckdb_tables() WHERE database_name = 'temp'`).Scan(&temps))
	require.Zero(t, temps, "a temp table made by a text's second statement")
	var left sql.NullInt64
	require.NoError(t, conn.QueryRowContext(ctx, `SELECT getvariable('hidden_too')`).Scan(&left))
	require.False(t, left.Valid, "a variable set by a text's third statement")

	_, err = conn.ExecContext(ctx, "SELECT 1; SET enable_progress_bar = true")
	require.NoError(t, err)
	require.NoError(t, conn.Close())
	conn, other := takeConn(t, db)
	require.NotSame(t, first, other, "a setting made by a text's second statement retires the connection")
	require.NoError(t, conn.Close())
}

// BenchmarkKeptStatement: a catalog read sent as text each time (what
// every statement cost before the connections kept them) against the same
// text run from the kept statement.
//
//	go test ./internal/run -run '^$' -bench KeptStatement
func BenchmarkKeptStatement(b *testing.B) {
	ctx := context.Background()
	const q = `SELECT job_key, parts, pipeline, target, snapshot, cursor, epoch FROM jobs WHERE job = ?`
	for _, kept := range []bool{false, true} {
		name := "text"
		if kept {
			name = "kept"
		}
		b.Run(name, func(b *testing.B) {
			var db *sql.DB
			var err error
			if kept {
				db, err = OpenMemory(ctx, "")
			} else {
				db, err = sql.Open("duckdb", "")
			}
			require.NoError(b, err)
			defer db.Close()
			conn, err := db.Conn(ctx)
			require.NoError(b, err)
			defer conn.Close()
			_, err = conn.ExecContext(ctx, `CREATE TABLE jobs (job VARCHAR, job_key VARCHAR, parts VARCHAR, pipeline VARCHAR, target VARCHAR, snapshot BIGINT, cursor VARCHAR, epoch BIGINT)`)
			require.NoError(b, err)
			b.ResetTimer()
			for b.Loop() {
				rows, err := conn.QueryContext(ctx, q, "j")
				require.NoError(b, err)
				require.NoError(b, rows.Close())
			}
		})
	}
}

// BenchmarkStatementFloor is what one kept statement costs DuckDB however
// little it does: a text already prepared on the connection, one thread.
// DuckDB 2.0 binds and plans a statement that scans a table again at each
// run (its optimizer marks a prepared plan that reads a database and
// holds a data source always_require_rebind, in its source at 044a04a),
// so a point read of a 20-row table costs what planning it costs, with a
// literal as with a parameter (docs/benchmarks.md, "The floor of a
// statement").
func BenchmarkStatementFloor(b *testing.B) {
	ctx := context.Background()
	db, err := OpenMemory(ctx, "")
	require.NoError(b, err)
	defer db.Close()
	conn, err := db.Conn(ctx)
	require.NoError(b, err)
	defer conn.Close()
	for _, s := range []string{"SET threads = 1", "CREATE TABLE t (k VARCHAR, a INT)",
		"INSERT INTO t SELECT 'j' || range, range FROM range(20)", "SET VARIABLE x = 'j5'"} {
		_, err := conn.ExecContext(ctx, s)
		require.NoError(b, err)
	}
	for _, c := range []struct {
		name, q string
		args    []any
	}{
		{"constants", "SELECT 1, 2, 3", nil},
		{"constants_param", "SELECT CAST(? AS INTEGER), 2, 3", []any{5}},
		{"point_literal", "SELECT a, 2, 3 FROM t WHERE k = 'j5'", nil},
		{"point_param", "SELECT a, 2, 3 FROM t WHERE k = ?", []any{"j5"}},
		{"point_variable", "SELECT a, 2, 3 FROM t WHERE k = getvariable('x')", nil},
	} {
		b.Run(c.name, func(b *testing.B) {
			var x, y, z int
			for b.Loop() {
				require.NoError(b, conn.QueryRowContext(ctx, c.q, c.args...).Scan(&x, &y, &z))
			}
		})
	}
}

func TestMakesCatalog(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		text string
		want bool
	}{
		{"SELECT 1", false},
		{"INSERT INTO t SELECT * FROM s", false},
		{"UPDATE t SET a = 1", false},
		{"DROP TABLE IF EXISTS temp.main.x", false},
		{"CREATE OR REPLACE TEMP TABLE staged AS SELECT 1", false},
		{"create temporary view v as select 1", false},
		{"CREATE TEMP MACRO m(x) AS x", false},
		{"SELECT 'CREATE TABLE t (a INT)'", false},
		{"SELECT $$ALTER TABLE t ADD PRIMARY KEY (a)$$", false},
		{"-- CREATE INDEX i ON t (a)\nSELECT 1", false},
		{"SELECT created_at, altered FROM t", false},
		{"CREATE TABLE t (a INT PRIMARY KEY)", true},
		{"CREATE OR REPLACE TABLE t AS SELECT 1", true},
		{"create unique index i on t (a)", true},
		{"CREATE TABLE temp.main.t (a INT)", true}, // errs towards true
		{"CREATE TABLE temp (a INT)", true},
		{"CREATE OR REPLACE TABLE temporary AS SELECT 1", true},
		{"CREATE", true},
		{"ALTER TABLE t ADD PRIMARY KEY (a)", true},
		{"SELECT 1;CREATE TABLE t (a INT)", true},
		{"CREATE OR REPLACE TEMP TABLE x AS SELECT 1; CREATE INDEX i ON t (a)", true},
		{"COPY FROM DATABASE a TO b", true},
		{"IMPORT DATABASE 'dir'", true},
		{"EXPLAIN (FORMAT json) CREATE TABLE t AS SELECT 1", true},
	} {
		require.Equal(t, tc.want, makesCatalog(sqltext.MaskSQL(tc.text)), tc.text)
	}
}

// TestCatalogChangedPerTransaction: a kept connection reports a table or
// an index made in its transaction, and forgets it at the next BeginTx;
// temp relations and rows do not count.
func TestCatalogChangedPerTransaction(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	conn := memConn(t)
	_, err := conn.ExecContext(ctx, "CREATE TABLE t (a INT)")
	require.NoError(t, err)
	for _, tc := range []struct {
		stmts []string
		want  bool
	}{
		{[]string{"INSERT INTO t VALUES (1)", "CREATE OR REPLACE TEMP TABLE x AS SELECT * FROM t", "DROP TABLE x"}, false},
		{[]string{"INSERT INTO t VALUES (2)", "CREATE INDEX t_a ON t (a)"}, true},
		{[]string{"UPDATE t SET a = a + 1"}, false},
		{[]string{"CREATE TABLE u AS SELECT 1 AS b"}, true},
		// A kept statement that made a table is seen again when it runs
		// from the cache.
		{[]string{"DROP TABLE u", "CREATE TABLE u AS SELECT 1 AS b"}, true},
	} {
		tx, err := conn.BeginTx(ctx, nil)
		require.NoError(t, err)
		for _, s := range tc.stmts {
			_, err := tx.ExecContext(ctx, s)
			require.NoError(t, err, s)
		}
		require.NoError(t, tx.Commit())
		require.Equal(t, tc.want, catalogChanged(conn), "%q", tc.stmts)
	}
}
