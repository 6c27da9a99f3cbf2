package catalog

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"testing"

	_ "github.com/duckdb/duckdb-go/v2"

	// DuckDB's freed memory stays mapped for the next database
	// (docs/reliability.md, How it is tested).
	_ "github.com/idem-dev/idem/internal/testflags"
	"github.com/stretchr/testify/require"
)

// These tests open DuckDB with database/sql directly: catalog may not
// import run, which opens idem's databases.

// openMemory opens a new in-memory DuckDB of one thread, closed with the
// test.
func openMemory(t *testing.T) *sql.DB {
	t.Helper()
	db, err := sql.Open("duckdb", "?threads=1")
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	// Every connection of the pool shares the one in-memory database; the
	// time zone is per connection, so keep one, as idem's stamps are UTC.
	// A test must end a transaction before it uses db again.
	db.SetMaxOpenConns(1)
	_, err = db.Exec("SET TimeZone = 'UTC'")
	require.NoError(t, err)
	return db
}

// newCatalog is an in-memory database migrated to the latest version.
func newCatalog(t *testing.T) *sql.DB {
	t.Helper()
	db := openMemory(t)
	require.NoError(t, Migrate(context.Background(), db, "mem", nil))
	return db
}

// exec runs statements that must succeed.
func exec(t *testing.T, db Querier, stmts ...string) {
	t.Helper()
	for _, s := range stmts {
		_, err := db.ExecContext(context.Background(), s)
		require.NoError(t, err, s)
	}
}

// rows reads a query's rows as text, one line per row, columns separated
// by "|" and NULL as "∅": a readable value to compare.
func rows(t *testing.T, db Querier, query string, args ...any) []string {
	t.Helper()
	r, err := db.QueryContext(context.Background(), query, args...)
	require.NoError(t, err, query)
	defer r.Close()
	cols, err := r.Columns()
	require.NoError(t, err)
	out := []string{}
	for r.Next() {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		require.NoError(t, r.Scan(ptrs...))
		s := make([]string, len(vals))
		for i, v := range vals {
			if v == nil {
				s[i] = "∅"
			} else {
				s[i] = fmt.Sprint(v)
			}
		}
		out = append(out, strings.Join(s, "|"))
	}
	require.NoError(t, r.Err())
	return out
}

// one reads a single value.
func one[T any](t *testing.T, db Querier, query string, args ...any) T {
	t.Helper()
	var v T
	require.NoError(t, db.QueryRowContext(context.Background(), query, args...).Scan(&v), query)
	return v
}

// begin begins a transaction rolled back with the test unless committed.
func begin(t *testing.T, db *sql.DB) *sql.Tx {
	t.Helper()
	tx, err := db.BeginTx(context.Background(), nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = tx.Rollback() })
	return tx
}
