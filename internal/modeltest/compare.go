package modeltest

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode"

	"github.com/idem-dev/idem/internal/catalog"
	"github.com/idem-dev/idem/internal/job"
	"github.com/idem-dev/idem/internal/sqltext"
)

// compare compares the model's result (its target in the scratch
// database) with the test's expected rows as multisets of rows, each value
// compared by its typed text: the expected value cast to the type of the
// result's column, then both read as VARCHAR. It fills r's diff, or
// returns a *failure when the columns differ.
func compare(ctx context.Context, q *sql.DB, m *job.Job, t *Test, r *Result) error {
	exp := t.Expect
	result, err := catalog.TargetColumns(ctx, q, m.Table)
	if err != nil {
		return err
	}
	if r.Rows, err = catalog.CountRows(ctx, q, m.Table); err != nil {
		return err
	}
	r.Expected = len(exp.Rows)
	types := map[string]string{}
	var resultNames []string
	for _, c := range result {
		types[c.Name] = c.Type
		resultNames = append(resultNames, c.Name)
	}
	// The columns compared: expect columns, else those the rows give (every
	// result column when rows = [] gives none).
	want := exp.Compare
	if want == nil {
		want = exp.Columns
		if len(exp.Rows) == 0 {
			want = resultNames
		}
		if err := sameColumns(m, resultNames, want); err != nil {
			return err
		}
	}
	for _, c := range want {
		if _, ok := types[c]; !ok {
			return &failure{fmt.Sprintf("expect.columns: %s is not a column of the result of %s (%s)", c, m.Name, strings.Join(resultNames, ", "))}
		}
	}
	// In the result's order, the model's key first: the diff's order.
	var cols []string
	for _, k := range m.Key {
		if slices.Contains(want, k) {
			cols = append(cols, k)
		}
	}
	keys := len(cols)
	for _, c := range resultNames {
		if slices.Contains(want, c) && !slices.Contains(cols, c) {
			cols = append(cols, c)
		}
	}
	r.Columns = cols

	expected, err := typedText(ctx, q, exp, cols, types, m)
	if err != nil {
		return err
	}
	return diff(ctx, q, m.Table, cols, keys, types, expected, r)
}

// sameColumns fails a test whose expected rows give other columns than the
// result's.
func sameColumns(m *job.Job, result, given []string) error {
	var missing, extra []string
	for _, c := range result {
		if !slices.Contains(given, c) {
			missing = append(missing, c)
		}
	}
	for _, c := range given {
		if !slices.Contains(result, c) {
			extra = append(extra, c)
		}
	}
	if len(missing)+len(extra) == 0 {
		return nil
	}
	var parts []string
	if len(extra) > 0 {
		parts = append(parts, fmt.Sprintf("the expected rows give %s, which the result does not have", strings.Join(extra, ", ")))
	}
	if len(missing) > 0 {
		parts = append(parts, fmt.Sprintf("the result has %s, which the expected rows do not give (or list the columns to compare in expect columns = [...])", strings.Join(missing, ", ")))
	}
	return &failure{fmt.Sprintf("the columns differ: the result of %s has columns %s; %s", m.Name, strings.Join(result, ", "), strings.Join(parts, "; "))}
}

// typedText is each expected row's values for cols as typed text: cast to
// the result column's type, then to VARCHAR (nil for NULL, and for a column
// a row leaves out). A value that does not cast fails the test.
func typedText(ctx context.Context, q *sql.DB, exp *Table, cols []string, types map[string]string, m *job.Job) ([][]*string, error) {
	if len(exp.Rows) == 0 {
		return nil, nil
	}
	list := make([]string, len(cols))
	for i, c := range cols {
		list[i] = "CAST(TRY_CAST(?::VARCHAR AS " + types[c] + ") AS VARCHAR)"
	}
	stmt := "SELECT " + strings.Join(list, ", ")
	out := make([][]*string, len(exp.Rows))
	for i, row := range exp.Rows {
		args := make([]any, len(cols))
		for k, c := range cols {
			args[k] = row[c].arg()
		}
		vals := make([]sql.NullString, len(cols))
		ptrs := make([]any, len(cols))
		for k := range vals {
			ptrs[k] = &vals[k]
		}
		if err := q.QueryRowContext(ctx, stmt, args...).Scan(ptrs...); err != nil {
			return nil, fmt.Errorf("cast the expected rows to the result's types: %w", catalog.TrimSQLError(err))
		}
		out[i] = make([]*string, len(cols))
		for k, c := range cols {
			if vals[k].Valid {
				out[i][k] = &vals[k].String
			} else if v := row[c]; !v.null() {
				return nil, &failure{fmt.Sprintf("%s: %scolumn %s: %q is not a %s, the type of column %s of the result of %s",
					rowKey(exp, i), rowWord(exp, i), c, v.text, types[c], c, m.Name)}
			}
		}
	}
	return out, nil
}

// diff counts each distinct row (as typed text) in the expected rows and
// in table, and records in r the rows whose counts differ, in the order of
// the typed values of the first keys columns (the model's key), missing
// rows first, then of the other columns.
func diff(ctx context.Context, q *sql.DB, table string, cols []string, keys int, types map[string]string, expected [][]*string, r *Result) error {
	alias := make([]string, len(cols))
	texts := make([]string, len(cols))
	match := make([]string, len(cols))
	pick := make([]string, len(cols))
	var order []string
	for i, c := range cols {
		alias[i] = fmt.Sprintf("c%d", i)
		texts[i] = "CAST(" + sqltext.QuoteIdent(c) + " AS VARCHAR) AS " + alias[i]
		match[i] = "e." + alias[i] + " IS NOT DISTINCT FROM r." + alias[i]
		pick[i] = "coalesce(e." + alias[i] + ", r." + alias[i] + ") AS " + alias[i]
		if ordered(types[c]) {
			order = append(order, "TRY_CAST("+alias[i]+" AS "+types[c]+") NULLS FIRST")
		}
		order = append(order, alias[i]+" NULLS FIRST")
		if i == keys-1 {
			order = append(order, "d DESC") // a key's missing row before its unexpected one
		}
	}
	if keys == 0 {
		order = append([]string{"d DESC"}, order...)
	}
	var e string
	var args []any
	if len(expected) == 0 {
		nulls := make([]string, len(cols))
		for i := range cols {
			nulls[i] = "NULL::VARCHAR AS " + alias[i]
		}
		e = "SELECT " + strings.Join(nulls, ", ") + " WHERE false"
	} else {
		params := make([]string, len(cols))
		for i := range cols {
			params[i] = "?::VARCHAR"
		}
		rows := make([]string, len(expected))
		for i, row := range expected {
			rows[i] = "(" + strings.Join(params, ", ") + ")"
			for _, v := range row {
				if v == nil {
					args = append(args, nil)
				} else {
					args = append(args, *v)
				}
			}
		}
		e = "SELECT * FROM (VALUES " + strings.Join(rows, ", ") + ") AS v(" + strings.Join(alias, ", ") + ")"
	}
	all := strings.Join(alias, ", ")
	stmt := "WITH e AS (SELECT " + all + ", count(*) AS n FROM (" + e + ") GROUP BY ALL),\n" +
		"r AS (SELECT " + all + ", count(*) AS n FROM (SELECT " + strings.Join(texts, ", ") + " FROM main." + sqltext.QuoteIdent(table) + ") GROUP BY ALL)\n" +
		"SELECT * FROM (SELECT coalesce(e.n, 0) - coalesce(r.n, 0) AS d, " + strings.Join(pick, ", ") +
		" FROM e FULL JOIN r ON " + strings.Join(match, " AND ") + " WHERE coalesce(e.n, 0) <> coalesce(r.n, 0))\n" +
		"ORDER BY " + strings.Join(order, ", ")
	rows, err := q.QueryContext(ctx, stmt, args...)
	if err != nil {
		return fmt.Errorf("compare the result with the expected rows: %w", catalog.TrimSQLError(err))
	}
	defer rows.Close()
	for rows.Next() {
		var d int64
		vals := make([]sql.NullString, len(cols))
		ptrs := []any{&d}
		for i := range vals {
			ptrs = append(ptrs, &vals[i])
		}
		if err := rows.Scan(ptrs...); err != nil {
			return err
		}
		row := make([]*string, len(cols))
		for i, v := range vals {
			if v.Valid {
				row[i] = &v.String
			}
		}
		for ; d > 0; d-- {
			r.Missing = append(r.Missing, row)
			r.lines = append(r.lines, diffLine{"-", row})
		}
		for ; d < 0; d++ {
			r.Unexpected = append(r.Unexpected, row)
			r.lines = append(r.lines, diffLine{"+", row})
		}
	}
	return rows.Err()
}

// ordered says whether a column of type t is ordered by its value rather
// than its text in a diff: numbers, booleans, dates and times, whose text
// casts back to the type. Other types (text, lists, structs, blobs) are
// ordered by their text.
func ordered(t string) bool {
	u := strings.ToUpper(t)
	if i := strings.IndexAny(u, "(["); i >= 0 {
		if strings.Contains(u, "[") {
			return false
		}
		u = u[:i]
	}
	switch strings.TrimSpace(u) {
	case "TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT", "UTINYINT", "USMALLINT", "UINTEGER", "UBIGINT", "UHUGEINT",
		"FLOAT", "DOUBLE", "DECIMAL", "BOOLEAN", "DATE", "TIME", "TIMESTAMP", "TIMESTAMP_S", "TIMESTAMP_MS", "TIMESTAMP_NS",
		"TIMESTAMP WITH TIME ZONE", "INTERVAL":
		return true
	}
	return false
}

// diffLine is a row of the diff as Explain prints it: missing (-) or
// unexpected (+).
type diffLine struct {
	sign string
	row  []*string
}

// DiffRowsShown is how many rows of a diff Explain prints.
const DiffRowsShown = 50

// Explain says, in lines for a person, why a test did not pass: its error,
// or a row diff of the rows the result lacks (-) and has beyond the
// expected ones (+), in columns, in the diff's order (missing and
// unexpected rows merged by key). Empty for a passing test.
func (r *Result) Explain() string {
	if r.Status == StatusPass {
		return ""
	}
	if r.Error != "" {
		return r.Error + "\n"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s missing (-), %d unexpected (+); the result has %s, the test expects %d\n",
		plural(len(r.Missing), "row"), len(r.Unexpected), plural(int(r.Rows), "row"), r.Expected)
	lines := r.lines
	more := 0
	if len(lines) > DiffRowsShown {
		lines, more = lines[:DiffRowsShown], len(lines)-DiffRowsShown
	}
	cells := make([][]string, 0, len(lines)+1)
	cells = append(cells, r.Columns)
	for _, l := range lines {
		row := make([]string, len(l.row))
		for j, v := range l.row {
			row[j] = showValue(v)
		}
		cells = append(cells, row)
	}
	width := make([]int, len(r.Columns))
	for _, row := range cells {
		for j, v := range row {
			width[j] = max(width[j], len([]rune(v)))
		}
	}
	for n, row := range cells {
		sign := " "
		if n > 0 {
			sign = lines[n-1].sign
		}
		b.WriteString(sign)
		for j, v := range row {
			b.WriteString("  ")
			if j == len(row)-1 {
				b.WriteString(v)
			} else {
				b.WriteString(v + strings.Repeat(" ", width[j]-len([]rune(v))))
			}
		}
		b.WriteString("\n")
	}
	if more > 0 {
		fmt.Fprintf(&b, "... and %d more (idem test --json lists them all)\n", more)
	}
	return b.String()
}

// showValue is a value as a diff prints it: NULL, or its text, quoted
// when it would be ambiguous (empty, the word NULL, spaces at its ends, a
// control character).
func showValue(v *string) string {
	if v == nil {
		return "NULL"
	}
	s := *v
	if s == "" || s == "NULL" || strings.TrimSpace(s) != s || strings.IndexFunc(s, unicode.IsControl) >= 0 {
		return strconv.Quote(s)
	}
	return s
}

func plural(n int, word string) string {
	if n == 1 {
		return fmt.Sprintf("1 %s", word)
	}
	return fmt.Sprintf("%d %ss", n, word)
}
