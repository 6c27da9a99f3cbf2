package diff

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/idem-dev/idem/internal/catalog"
	"github.com/idem-dev/idem/internal/sqltext"
)

// RerunRowsShown is how many changed rows a rerun that does not reproduce
// details column by column.
const RerunRowsShown = 5

// RowDifference is a changed row: its key (as in ChangedKeys) and the
// columns whose values differ.
type RowDifference struct {
	Key     string             `json:"key"`
	Columns []ColumnDifference `json:"columns"`
}

// ColumnDifference is one column of a changed row: its value on the from
// side and on the to side as text (nil for NULL) and, when both read as
// numbers, to minus from.
type ColumnDifference struct {
	Column string   `json:"column"`
	From   *string  `json:"from"`
	To     *string  `json:"to"`
	Delta  *float64 `json:"delta,omitempty"`
}

// keyTextOf is the text of a row's key as diffs print it: the value of a
// single key column, or the values of a composite key joined by "|" (NULL
// as NULL), of the columns qualified by alias when it is not "".
func keyTextOf(key []string, alias string) string {
	col := func(k string) string {
		if alias == "" {
			return sqltext.QuoteIdent(k)
		}
		return alias + "." + sqltext.QuoteIdent(k)
	}
	if len(key) == 1 {
		return "CAST(" + col(key[0]) + " AS VARCHAR)"
	}
	parts := make([]string, len(key))
	for i, k := range key {
		parts[i] = "coalesce(CAST(" + col(k) + " AS VARCHAR), 'NULL')"
	}
	return "concat_ws('|', " + strings.Join(parts, ", ") + ")"
}

// PairConditions are the conditions of a diff's join of sides a and b on
// the key (NULL pairs with NULL) and of a pair that differs in another
// column ("" when every column is the key).
func PairConditions(cols, key []string) (on, differ string) {
	var ons, differs []string
	for _, k := range key {
		ons = append(ons, "a."+sqltext.QuoteIdent(k)+" IS NOT DISTINCT FROM b."+sqltext.QuoteIdent(k))
	}
	for _, c := range cols {
		if !slices.Contains(key, c) {
			differs = append(differs, "a."+sqltext.QuoteIdent(c)+" IS DISTINCT FROM b."+sqltext.QuoteIdent(c))
		}
	}
	return strings.Join(ons, " AND "), strings.Join(differs, " OR ")
}

// changedRows returns the first limit rows, in key order, whose key is in
// both from and to with other values, each with the columns that differ.
func changedRows(ctx context.Context, q catalog.Querier, from, to string, cols, key []string, limit int) ([]RowDifference, error) {
	on, differ := PairConditions(cols, key)
	var other, values []string
	for _, c := range cols {
		if slices.Contains(key, c) {
			continue
		}
		qc := sqltext.QuoteIdent(c)
		other = append(other, c)
		values = append(values, "CAST(a."+qc+" AS VARCHAR)", "CAST(b."+qc+" AS VARCHAR)")
	}
	order := make([]string, len(key))
	for i, k := range key {
		order[i] = "a." + sqltext.QuoteIdent(k)
	}
	query := fmt.Sprintf("SELECT %s, %s FROM (%s) AS a JOIN (%s) AS b ON %s WHERE %s ORDER BY %s LIMIT %d",
		keyTextOf(key, "a"), strings.Join(values, ", "), from, to, on, differ, strings.Join(order, ", "), limit)
	rows, err := q.QueryContext(ctx, query)
	if err != nil {
		return nil, fmt.Errorf("diff: %w", catalog.TrimSQLError(err))
	}
	defer rows.Close()
	var out []RowDifference
	for rows.Next() {
		var k sql.NullString
		vals := make([]sql.NullString, len(values))
		dest := []any{&k}
		for i := range vals {
			dest = append(dest, &vals[i])
		}
		if err := rows.Scan(dest...); err != nil {
			return nil, err
		}
		r := RowDifference{Key: k.String}
		for i, c := range other {
			a, b := vals[2*i], vals[2*i+1]
			if a == b {
				continue
			}
			r.Columns = append(r.Columns, columnDifference(c, a, b))
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// columnDifference is column c's values a (from) and b (to), with b - a
// when both parse as numbers.
func columnDifference(c string, a, b sql.NullString) ColumnDifference {
	d := ColumnDifference{Column: c}
	if a.Valid {
		d.From = &a.String
	}
	if b.Valid {
		d.To = &b.String
	}
	if a.Valid && b.Valid {
		x, errA := strconv.ParseFloat(a.String, 64)
		y, errB := strconv.ParseFloat(b.String, 64)
		if errA == nil && errB == nil {
			delta := y - x
			d.Delta = &delta
		}
	}
	return d
}
