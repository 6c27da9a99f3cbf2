package runner

import (
	"context"
	"database/sql"
	"fmt"
)

// Rows is a read-only query's result: column names and values, with SQL
// NULL as nil.
type Rows struct {
	Columns []string
	Values  [][]any
}

// Query runs read-only SQL against the database at path, opened read-only.
func Query(ctx context.Context, path, query string, opts OpenOptions) (*Rows, error) {
	opts.ReadOnly = true
	db, err := Open(ctx, path, opts)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	return db.Query(ctx, query)
}

// Query runs one query and collects its rows.
func (d *DB) Query(ctx context.Context, query string, args ...any) (*Rows, error) {
	rows, err := d.sql.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("query: %w", trimSQLError(err))
	}
	defer rows.Close()
	return collect(rows)
}

func collect(rows *sql.Rows) (*Rows, error) {
	cols, err := rows.Columns()
	if err != nil {
		return nil, err
	}
	out := &Rows{Columns: cols}
	for rows.Next() {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			return nil, err
		}
		out.Values = append(out.Values, vals)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("query: %w", trimSQLError(err))
	}
	return out, nil
}

// DuckDBVersion reports the bundled DuckDB's version.
func DuckDBVersion(ctx context.Context) (string, error) {
	db, err := open(ctx, "")
	if err != nil {
		return "", err
	}
	defer db.Close()
	var v string
	err = db.QueryRowContext(ctx, "SELECT version()").Scan(&v)
	return v, err
}
