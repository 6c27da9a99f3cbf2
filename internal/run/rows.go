package run

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/idem-dev/idem/internal/catalog"
)

// Rows is a read-only query's result: column names and values, with SQL
// NULL as nil.
type Rows struct {
	Columns []string
	// Kinds says, for QueryTextReader, how each column's text is written where
	// types matter (JSON): a number, a boolean or a string.
	Kinds  []Kind
	Values [][]any
}

// Kind is what a column's values are, for an output that has types.
type Kind int

const (
	// KindText is any value written as a string: text, dates, times,
	// intervals, UUIDs, blobs, lists, structs, maps.
	KindText Kind = iota
	// KindNumber is an integer, DECIMAL or floating-point value.
	KindNumber
	// KindBool is a BOOLEAN.
	KindBool
)

// Query runs one query and collects its rows.
func (d *DB) Query(ctx context.Context, query string, args ...any) (*Rows, error) {
	rows, err := d.sql.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("query: %w", catalog.TrimSQLError(err))
	}
	defer rows.Close()
	return Collect(rows)
}

// Collect reads every row of rows, with SQL NULL as nil.
func Collect(rows *sql.Rows) (*Rows, error) {
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
		return nil, fmt.Errorf("query: %w", catalog.TrimSQLError(err))
	}
	return out, nil
}
