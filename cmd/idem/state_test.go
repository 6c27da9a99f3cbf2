package main

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idem-dev/idem/internal/run"
)

// dumpState opens the database at path for writing (so a WAL left by a
// crash is replayed exactly as the next run would replay it) and returns
// everything it holds as text, one line per row, in a total order: every
// table of every schema (targets, <table>_outcomes, idem.jobs, idem.ledger,
// idem.snapshots, idem.released, idem.inputs, history tables) with its
// columns and rows, and every view's SQL. Left out: idem.runs, the run log,
// which also records runs that committed nothing, idem.commits, which holds
// the database's random id, and TIMESTAMP columns,
// which differ between two otherwise identical runs.
func dumpState(t testing.TB, path string) string {
	t.Helper()
	ctx := context.Background()
	db, err := run.Open(ctx, path, run.OpenOptions{})
	require.NoError(t, err, "reopen %s", path)
	defer db.Close()
	s, err := dumpDB(ctx, db.SQL())
	require.NoError(t, err, "dump %s", path)
	return s
}

func dumpDB(ctx context.Context, db *sql.DB) (string, error) {
	var b strings.Builder
	tables, err := queryStrings(ctx, db, `SELECT schema_name || '.' || table_name FROM duckdb_tables()
		WHERE database_name = current_database() ORDER BY ALL`)
	if err != nil {
		return "", err
	}
	for _, st := range tables {
		if st == "idem.runs" || st == "idem.commits" {
			continue
		}
		schema, table, _ := strings.Cut(st, ".")
		cols, err := queryStrings(ctx, db, `SELECT column_name || ' ' || data_type FROM duckdb_columns()
			WHERE database_name = current_database() AND schema_name = ? AND table_name = ? ORDER BY column_index`, schema, table)
		if err != nil {
			return "", err
		}
		var sel []string
		for _, c := range cols {
			name, typ, _ := strings.Cut(c, " ")
			if strings.HasPrefix(typ, "TIMESTAMP") {
				continue
			}
			sel = append(sel, "coalesce(CAST("+qi(name)+" AS VARCHAR), '<null>')")
		}
		fmt.Fprintf(&b, "table %s (%s)\n", st, strings.Join(cols, ", "))
		if len(sel) == 0 {
			continue
		}
		rows, err := queryStrings(ctx, db, "SELECT concat_ws(' | ', "+strings.Join(sel, ", ")+") AS r FROM "+qi(schema)+"."+qi(table)+" ORDER BY r")
		if err != nil {
			return "", err
		}
		for _, r := range rows {
			fmt.Fprintf(&b, "  %s\n", r)
		}
	}
	views, err := queryStrings(ctx, db, `SELECT schema_name || '.' || view_name || ': ' || sql FROM duckdb_views()
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

func queryStrings(ctx context.Context, db *sql.DB, q string, args ...any) ([]string, error) {
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

// copyDir copies the files under src into dst (created), keeping the tree.
func copyDir(t testing.TB, src, dst string) {
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

// firstDiff shows where two dumps part, for failure messages.
func firstDiff(a, b string) string {
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
