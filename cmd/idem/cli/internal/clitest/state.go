package clitest

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idem-dev/idem/internal/job"
	"github.com/idem-dev/idem/internal/run"
)

// DumpState returns everything the database at path holds as text, one
// line per row, in a total order: every table of every schema (targets,
// <table>_outcomes, idem.jobs, idem.ledger, idem.snapshots, idem.released,
// idem.inputs, history tables) with its columns and rows, and every view's
// SQL. Left out: idem.runs, the run log, which also records runs that
// committed nothing, idem.commits, which holds the database's random id,
// idem.meta's rows of that id and its creation time (catalog version 9),
// and TIMESTAMP columns, which differ between two otherwise identical runs.
// A WAL beside the database (left by a crash) is replayed as the next open
// replays it, in memory (inspect): the files stay as they are.
func DumpState(t testing.TB, path string) string {
	t.Helper()
	return cachedState("dump", path, func(s string) int { return len(s) }, func() string { return dumpState(t, path) })
}

func dumpState(t testing.TB, path string) string {
	t.Helper()
	var s string
	Inspect(t, path, func(conn *sql.Conn) {
		var err error
		s, err = DumpDB(context.Background(), conn)
		require.NoError(t, err, "dump %s", path)
	})
	return s
}

// NewDatabaseState is the DumpState of a new database: idem's own tables
// only.
func NewDatabaseState(t testing.TB) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "new.duckdb")
	db, err := run.Open(context.Background(), path, run.OpenOptions{DuckDB: job.DuckDBSettings{Threads: 1}})
	require.NoError(t, err)
	require.NoError(t, db.Close())
	return DumpState(t, path)
}

// inspector is the one in-memory DuckDB through which the tests read
// database files (inspect): starting a DuckDB for each read cost more than
// most reads.
var (
	inspector = sync.OnceValues(func() (*sql.DB, error) {
		db, err := sql.Open("duckdb", "?threads="+TestThreads+"&autoinstall_known_extensions=false")
		if err == nil {
			_, err = db.Exec("SET GLOBAL TimeZone = 'UTC'")
		}
		return db, err
	})
	inspected atomic.Int64
)

// Inspect calls f with a connection on which the database file at path is
// attached read-only as the default catalog, as a plain DuckDB client reads
// it: DuckDB replays a WAL beside it in memory, nothing is written, and,
// unlike run.Open, nothing beside the database is swept or removed (what a
// killed command left stays for the next idem command, which the tests
// check). The file is detached when f returns.
func Inspect(t testing.TB, path string, f func(conn *sql.Conn)) {
	t.Helper()
	_, err := os.Stat(path)
	require.NoError(t, err, "inspect %s", path)
	ctx := context.Background()
	db, err := inspector()
	require.NoError(t, err)
	conn, err := db.Conn(ctx)
	require.NoError(t, err)
	defer conn.Close()
	alias := fmt.Sprintf("inspected%d", inspected.Add(1))
	_, err = conn.ExecContext(ctx, "ATTACH "+SQLQuote(path)+" AS "+alias+" (READ_ONLY)")
	require.NoError(t, err, "inspect %s", path)
	defer func() {
		_, err := conn.ExecContext(ctx, "USE memory; DETACH "+alias)
		require.NoError(t, err)
	}()
	_, err = conn.ExecContext(ctx, "USE "+alias)
	require.NoError(t, err)
	f(conn)
}

// queryer is what DumpDB reads through: a *sql.DB or a *sql.Conn.
type queryer interface {
	QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error)
}

// DumpDB renders every table of db, idem's own included, with its rows
// in order, as text that two states can be compared by.
func DumpDB(ctx context.Context, db queryer) (string, error) {
	var b strings.Builder
	cols, err := QueryStrings(ctx, db, `SELECT schema_name || '.' || table_name || chr(9) || column_name || ' ' || data_type FROM duckdb_columns()
		WHERE database_name = current_database() ORDER BY schema_name, table_name, column_index`)
	if err != nil {
		return "", err
	}
	var tables []string
	columns := map[string][]string{}
	for _, c := range cols {
		st, col, _ := strings.Cut(c, "\t")
		if len(columns[st]) == 0 {
			tables = append(tables, st)
		}
		columns[st] = append(columns[st], col)
	}
	for _, st := range tables {
		if st == "idem.runs" || st == "idem.commits" {
			continue
		}
		schema, table, _ := strings.Cut(st, ".")
		var sel []string
		for _, c := range columns[st] {
			name, typ, _ := strings.Cut(c, " ")
			// A verdict's MAC is keyed by the database's id and a
			// secret of its own (run/verdicts.go), as db_id differs.
			if strings.HasPrefix(typ, "TIMESTAMP") || st == "idem.verdicts" && name == "mac" {
				continue
			}
			sel = append(sel, "coalesce(CAST("+qi(name)+" AS VARCHAR), '<null>')")
		}
		fmt.Fprintf(&b, "table %s (%s)\n", st, strings.Join(columns[st], ", "))
		if len(sel) == 0 {
			continue
		}
		where := ""
		if st == "idem.meta" {
			where = " WHERE key NOT IN ('db_id', 'db_created_at')"
		}
		rows, err := QueryStrings(ctx, db, "SELECT concat_ws(' | ', "+strings.Join(sel, ", ")+") AS r FROM "+qi(schema)+"."+qi(table)+where+" ORDER BY r")
		if err != nil {
			return "", err
		}
		for _, r := range rows {
			fmt.Fprintf(&b, "  %s\n", r)
		}
	}
	views, err := QueryStrings(ctx, db, `SELECT schema_name || '.' || view_name || ': ' || sql FROM duckdb_views()
		WHERE database_name = current_database() AND NOT internal ORDER BY ALL`)
	if err != nil {
		return "", err
	}
	for _, v := range views {
		fmt.Fprintf(&b, "view %s\n", v)
	}
	return b.String(), nil
}

func qi(s string) string { return `"` + strings.ReplaceAll(s, `"`, `""`) + `"` }

// QueryStrings runs q on db and returns the first column of each row as
// text.
func QueryStrings(ctx context.Context, db queryer, q string, args ...any) ([]string, error) {
	rows, err := db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", q, err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, rows.Err()
}

// CopyDir copies the files under src into dst (created), keeping the tree.
func CopyDir(t testing.TB, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		to := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(to, 0o755)
		}
		in, err := os.Open(p)
		if err != nil {
			return err
		}
		defer in.Close()
		out, err := os.Create(to)
		if err != nil {
			return err
		}
		if _, err := io.Copy(out, in); err != nil {
			out.Close()
			return err
		}
		return out.Close()
	})
	require.NoError(t, err)
}

// FirstDiff shows where two dumps part, for failure messages.
func FirstDiff(a, b string) string {
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	for i := 0; i < len(al) || i < len(bl); i++ {
		var x, y string
		if i < len(al) {
			x = al[i]
		}
		if i < len(bl) {
			y = bl[i]
		}
		if x != y {
			return fmt.Sprintf("line %d:\n  - %s\n  + %s", i+1, x, y)
		}
	}
	return "no difference"
}
