package diff

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/idem-dev/idem/internal/catalog"
	"github.com/idem-dev/idem/internal/export"
	"github.com/idem-dev/idem/internal/job"
	"github.com/idem-dev/idem/internal/report"
	"github.com/idem-dev/idem/internal/run"
	"github.com/idem-dev/idem/internal/source"
	"github.com/idem-dev/idem/internal/sqltext"
)

// KeysShown is how many keys of each kind a diff lists.
const KeysShown = 10

// Side is one side of a diff: a snapshot or a file, and the sha256 of
// its canonical export (a snapshot) or its bytes (a file).
type Side struct {
	Snapshot int64  `json:"snapshot,omitempty"`
	Path     string `json:"path,omitempty"`
	SHA256   string `json:"sha256"`
	Rows     int64  `json:"rows"`
}

// Result compares two sides by key: rows whose key is only in To are
// added, only in From removed, in both with other values changed. The key
// lists hold the first KeysShown keys of each kind, in key order.
type Result struct {
	Job         string   `json:"job,omitempty"`
	Table       string   `json:"table,omitempty"`
	Key         []string `json:"key"`
	From        Side     `json:"from"`
	To          Side     `json:"to"`
	Identical   bool     `json:"identical"`
	Added       int64    `json:"added"`
	Removed     int64    `json:"removed"`
	Changed     int64    `json:"changed"`
	AddedKeys   []string `json:"added_keys"`
	RemovedKeys []string `json:"removed_keys"`
	ChangedKeys []string `json:"changed_keys"`
	// ChangedRows, when asked for (a rerun that does not reproduce), are
	// the first changed rows in key order, column by column.
	ChangedRows []RowDifference `json:"changed_rows,omitempty"`
	// ColumnsAdded and ColumnsRemoved name the columns only the later or
	// only the earlier snapshot has (a schema change between them), and
	// ColumnsRetyped those whose type changed; rows are then compared on
	// the columns both have.
	ColumnsAdded   []string       `json:"columns_added,omitempty"`
	ColumnsRemoved []string       `json:"columns_removed,omitempty"`
	ColumnsRetyped []ColumnChange `json:"columns_retyped,omitempty"`
	// Partitions are, for a job with [target] partition_by, the partitions
	// whose rows differ between the two snapshots, in the column's order.
	Partitions []string `json:"partitions,omitempty"`
}

// Options say which snapshots and table idem diff compares.
type Options struct {
	From, To int64
	Table    string
}

// Diff compares a table of job at two snapshots. Each side's sha256 is that
// of its canonical export (csv, key order), the one idem export writes.
func Diff(ctx context.Context, d *run.DB, j *job.Job, opts Options) (*Result, error) {
	if opts.From == 0 || opts.To == 0 {
		return nil, report.Usage("diff needs --from S1 and --to S2")
	}
	conn, tx, err := d.BeginPinned(ctx)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	defer tx.Rollback()
	from, err := export.PinnedSource(ctx, tx, j, opts.Table, opts.From)
	if err != nil {
		return nil, err
	}
	to, err := export.PinnedSource(ctx, tx, j, opts.Table, opts.To)
	if err != nil {
		return nil, err
	}
	res := &Result{Job: j.Name, Table: from.Table, From: Side{Snapshot: from.Snapshot}, To: Side{Snapshot: to.Snapshot}}
	dir, err := os.MkdirTemp("", "idem-diff-*")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	for _, side := range []struct {
		src *export.TableSource
		out *Side
	}{{from, &res.From}, {to, &res.To}} {
		n, sum, _, err := export.CopyTo(ctx, tx, side.src.Ordered(), filepath.Join(dir, fmt.Sprintf("%d.csv", side.src.Snapshot)), job.FormatCSV, "", report.Progress{}, nil)
		if err != nil {
			return nil, err
		}
		side.out.Rows, side.out.SHA256 = n, sum
	}
	if !slices.Equal(from.Columns, to.Columns) || !slices.Equal(from.Types, to.Types) {
		if err := CommonColumns(from, to, res); err != nil {
			return nil, err
		}
	}
	key := from.Key
	if err := CompareRows(ctx, tx, from.Query, to.Query, from.Columns, key, 0, res); err != nil {
		return nil, err
	}
	if col := j.PartitionBy; col != "" && from.Table == j.Table && slices.Contains(from.Columns, col) {
		qc := sqltext.QuoteIdent(col)
		q := "SELECT CAST(v AS VARCHAR) FROM (SELECT DISTINCT " + qc + " AS v FROM (((" + from.Query + ") EXCEPT ALL (" + to.Query + ")) UNION ALL ((" +
			to.Query + ") EXCEPT ALL (" + from.Query + ")))) ORDER BY v NULLS LAST"
		rows, err := tx.QueryContext(ctx, q)
		if err != nil {
			return nil, fmt.Errorf("diff: partitions: %w", catalog.TrimSQLError(err))
		}
		defer rows.Close()
		res.Partitions = []string{}
		for rows.Next() {
			var v sql.NullString
			if err := rows.Scan(&v); err != nil {
				return nil, err
			}
			res.Partitions = append(res.Partitions, v.String)
		}
		if err := rows.Err(); err != nil {
			return nil, err
		}
	}
	return res, nil
}

// DiffFiles compares two exported files (csv, parquet or jsonl, by
// extension unless format is given) by key: the first column unless key
// names others. Values are compared as text.
func DiffFiles(ctx context.Context, file1, file2, format string, key []string) (*Result, error) {
	return DiffFilesDetail(ctx, file1, file2, format, key, 0)
}

// DiffFilesDetail is DiffFiles that also details the first detail changed rows
// column by column (ChangedRows).
func DiffFilesDetail(ctx context.Context, file1, file2, format string, key []string, detail int) (*Result, error) {
	res := &Result{From: Side{Path: file1}, To: Side{Path: file2}}
	readers := make([]string, 2)
	for i, p := range []string{file1, file2} {
		st, err := os.Stat(p)
		if err != nil {
			return nil, fmt.Errorf("diff %s: %w", p, err)
		}
		if st.IsDir() {
			return nil, report.Usage("diff %s: is a folder; compare its files or manifests", p)
		}
		f, err := export.Format(format, p)
		if err != nil {
			return nil, err
		}
		sum, _, err := source.FileSHA256(p)
		if err != nil {
			return nil, fmt.Errorf("diff %s: %w", p, err)
		}
		side := &res.From
		if i == 1 {
			side = &res.To
		}
		side.SHA256 = sum
		switch f {
		case job.FormatCSV:
			readers[i] = "read_csv(" + sqltext.SQLString(p) + ", header = true, all_varchar = true)"
		case job.FormatParquet:
			readers[i] = "read_parquet(" + sqltext.SQLString(p) + ")"
		default:
			readers[i] = "read_json(" + sqltext.SQLString(p) + ", format = 'newline_delimited')"
		}
	}
	db, err := run.OpenMemory(ctx, "?autoinstall_known_extensions=false")
	if err != nil {
		return nil, err
	}
	defer db.Close()
	conn, err := db.Conn(ctx)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	var cols [2][]string
	for i, r := range readers {
		name := []string{"idem_diff_a", "idem_diff_b"}[i]
		if _, err := conn.ExecContext(ctx, "CREATE TEMP TABLE "+name+" AS SELECT COLUMNS(*)::VARCHAR FROM "+r); err != nil {
			return nil, fmt.Errorf("diff: read %s: %w", []string{file1, file2}[i], catalog.TrimSQLError(err))
		}
		c, err := columnNames(ctx, conn, name)
		if err != nil {
			return nil, err
		}
		cols[i] = c
	}
	if !slices.Equal(cols[0], cols[1]) {
		return nil, report.Usage("diff: %s and %s have different columns (%s / %s); diff compares files of one layout", file1, file2, strings.Join(cols[0], ", "), strings.Join(cols[1], ", "))
	}
	if len(cols[0]) == 0 {
		return nil, fmt.Errorf("diff: %s has no columns", file1)
	}
	keyGiven := len(key) > 0
	if !keyGiven {
		key = cols[0][:1]
	}
	for _, k := range key {
		if !slices.Contains(cols[0], k) {
			return nil, report.Usage("--key %s: the files have no such column (columns: %s)", k, strings.Join(cols[0], ", "))
		}
	}
	if err := requireUniqueKey(ctx, conn, [2]string{file1, file2}, cols[0], key, keyGiven); err != nil {
		return nil, err
	}
	for _, side := range []*Side{&res.From, &res.To} {
		name := "idem_diff_a"
		if side == &res.To {
			name = "idem_diff_b"
		}
		if err := conn.QueryRowContext(ctx, "SELECT count(*) FROM "+name).Scan(&side.Rows); err != nil {
			return nil, err
		}
	}
	if err := CompareRows(ctx, conn, "SELECT * FROM idem_diff_a", "SELECT * FROM idem_diff_b", cols[0], key, detail, res); err != nil {
		return nil, err
	}
	return res, nil
}

// diffPairColumns bounds the search for a pair of columns that would key a
// diff: the pairs among the first diffPairColumns columns.
const diffPairColumns = 16

// requireUniqueKey refuses (exit 2) a key that holds one value twice in
// either file (idem_diff_a, idem_diff_b): joined on it, rows would pair
// with many and the changes could outnumber the rows. The message names the
// columns, or pairs of columns, unique in both files. A key of every
// column compares the files as multisets of rows, which any rows allow.
func requireUniqueKey(ctx context.Context, q catalog.Querier, files [2]string, cols, key []string, keyGiven bool) error {
	if len(key) == len(cols) {
		return nil
	}
	for i, table := range []string{"idem_diff_a", "idem_diff_b"} {
		var rows, distinct int64
		err := q.QueryRowContext(ctx, "SELECT (SELECT count(*) FROM "+table+"), (SELECT count(*) FROM (SELECT DISTINCT "+export.IdentList(key)+" FROM "+table+"))").Scan(&rows, &distinct)
		if err != nil {
			return fmt.Errorf("diff: %w", catalog.TrimSQLError(err))
		}
		if rows == distinct {
			continue
		}
		what := "--key " + strings.Join(key, ",")
		if !keyGiven {
			what = "the first column, " + key[0] + ","
		}
		hint, err := uniqueKeyHint(ctx, q, cols)
		if err != nil {
			return err
		}
		return report.Usage("diff: %s is not unique in %s (%d rows, %d distinct keys), so it cannot pair the rows of the two files; %s", what, files[i], rows, distinct, hint)
	}
	return nil
}

// uniqueKeyHint says which single columns, or else which pairs of columns,
// are unique in both files, for the user to pass as --key.
func uniqueKeyHint(ctx context.Context, q catalog.Querier, cols []string) (string, error) {
	var single, pairs []string
	var pairCols [][2]string
	var exprs []string
	for _, c := range cols {
		qc := sqltext.QuoteIdent(c)
		// NULL counts as one value, as the diff's join takes it.
		exprs = append(exprs, "count(DISTINCT "+qc+") + coalesce(max(CASE WHEN "+qc+" IS NULL THEN 1 ELSE 0 END), 0)")
	}
	n := min(len(cols), diffPairColumns)
	for i := 0; i < n; i++ {
		for j := i + 1; j < n; j++ {
			pairCols = append(pairCols, [2]string{cols[i], cols[j]})
			exprs = append(exprs, "count(DISTINCT row("+sqltext.QuoteIdent(cols[i])+", "+sqltext.QuoteIdent(cols[j])+"))")
		}
	}
	unique := make([]bool, len(exprs))
	for i := range unique {
		unique[i] = true
	}
	for _, table := range []string{"idem_diff_a", "idem_diff_b"} {
		vals := make([]int64, len(exprs)+1)
		dest := make([]any, len(vals))
		for i := range vals {
			dest[i] = &vals[i]
		}
		if err := q.QueryRowContext(ctx, "SELECT count(*), "+strings.Join(exprs, ", ")+" FROM "+table).Scan(dest...); err != nil {
			return "", fmt.Errorf("diff: %w", catalog.TrimSQLError(err))
		}
		for i := range exprs {
			unique[i] = unique[i] && vals[i+1] == vals[0]
		}
	}
	for i, c := range cols {
		if unique[i] {
			single = append(single, c)
		}
	}
	for i, p := range pairCols {
		if unique[len(cols)+i] {
			pairs = append(pairs, p[0]+","+p[1])
		}
	}
	switch {
	case len(single) > 0:
		return "columns unique in both files: " + strings.Join(single, ", ") + "; pass one as --key", nil
	case len(pairs) > 0:
		if len(pairs) > 5 {
			pairs = append(pairs[:5], "...")
		}
		return "no single column is unique in both files; pairs that are: " + strings.Join(pairs, " ") + "; pass one as --key A,B", nil
	}
	none := "no single column or pair of columns"
	if len(cols) > diffPairColumns {
		none = fmt.Sprintf("no single column, nor pair of the first %d columns,", diffPairColumns)
	}
	return none + " is unique in both files; pass --key with the columns that identify a row (--key with every column compares the files as sets of rows)", nil
}

func columnNames(ctx context.Context, q catalog.Querier, temp string) ([]string, error) {
	rows, err := q.QueryContext(ctx, `SELECT column_name FROM duckdb_columns() WHERE database_name = 'temp' AND table_name = ? ORDER BY column_index`, temp)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var c string
		if err := rows.Scan(&c); err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, rows.Err()
}

// CompareRows fills the counts and first keys of res from two queries with
// the same columns, and with detail above zero the first detail changed
// rows column by column. When the key is every column (a log such as
// outcomes), rows are compared as multisets: only added and removed.
func CompareRows(ctx context.Context, q catalog.Querier, from, to string, cols, key []string, detail int, res *Result) error {
	res.Key = key
	keyText := keyTextOf(key, "")
	order := " ORDER BY " + export.IdentList(key)
	var added, removed, changed string
	if len(key) == len(cols) {
		added = "(" + to + ") EXCEPT ALL (" + from + ")"
		removed = "(" + from + ") EXCEPT ALL (" + to + ")"
	} else {
		on, differ := PairConditions(cols, key)
		join := " ON " + on
		added = "SELECT b.* FROM (" + to + ") AS b ANTI JOIN (" + from + ") AS a" + join
		removed = "SELECT a.* FROM (" + from + ") AS a ANTI JOIN (" + to + ") AS b" + join
		if differ != "" {
			changed = "SELECT a.* FROM (" + from + ") AS a JOIN (" + to + ") AS b" + join + " WHERE " + differ
		}
	}
	for _, part := range []struct {
		query string
		count *int64
		keys  *[]string
	}{{added, &res.Added, &res.AddedKeys}, {removed, &res.Removed, &res.RemovedKeys}, {changed, &res.Changed, &res.ChangedKeys}} {
		*part.keys = []string{}
		if part.query == "" {
			continue
		}
		err := q.QueryRowContext(ctx, "SELECT count(*) FROM ("+part.query+")").Scan(part.count)
		if err != nil {
			return fmt.Errorf("diff: %w", catalog.TrimSQLError(err))
		}
		rows, err := q.QueryContext(ctx, fmt.Sprintf("SELECT %s FROM (%s)%s LIMIT %d", keyText, part.query, order, KeysShown))
		if err != nil {
			return fmt.Errorf("diff: %w", catalog.TrimSQLError(err))
		}
		for rows.Next() {
			var k sql.NullString
			if err := rows.Scan(&k); err != nil {
				rows.Close()
				return err
			}
			*part.keys = append(*part.keys, k.String)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
	}
	res.Identical = res.Added == 0 && res.Removed == 0 && res.Changed == 0 &&
		len(res.ColumnsAdded)+len(res.ColumnsRemoved)+len(res.ColumnsRetyped) == 0
	if detail > 0 && res.Changed > 0 && len(key) < len(cols) {
		rows, err := changedRows(ctx, q, from, to, cols, key, detail)
		if err != nil {
			return err
		}
		res.ChangedRows = rows
	}
	return nil
}

// ColumnChange is a column whose type changed between two snapshots.
type ColumnChange struct {
	Name string `json:"name"`
	From string `json:"from"`
	To   string `json:"to"`
}

// ColumnChanges compares the columns of an earlier and a later snapshot:
// those only the later has (added), only the earlier has (removed), and
// those whose type changed, each in its side's order.
func ColumnChanges(before, after []catalog.TargetColumn) (added, removed []string, retyped []ColumnChange) {
	afterType := map[string]string{}
	for _, c := range after {
		afterType[c.Name] = c.Type
	}
	beforeHas := map[string]bool{}
	for _, c := range before {
		beforeHas[c.Name] = true
		switch t, ok := afterType[c.Name]; {
		case !ok:
			removed = append(removed, c.Name)
		case t != c.Type:
			retyped = append(retyped, ColumnChange{Name: c.Name, From: c.Type, To: t})
		}
	}
	for _, c := range after {
		if !beforeHas[c.Name] {
			added = append(added, c.Name)
		}
	}
	return added, removed, retyped
}

// CommonColumns narrows both sides of a diff of snapshots with different
// columns to the columns they share, in the earlier side's order, and
// records the columns added, removed and retyped. A retyped column is
// compared as DOUBLE when both its types are numeric, else as text. The
// key must be shared and keep its types.
func CommonColumns(from, to *export.TableSource, res *Result) error {
	res.ColumnsAdded, res.ColumnsRemoved, res.ColumnsRetyped = ColumnChanges(from.TargetColumns(), to.TargetColumns())
	retyped := map[string]ColumnChange{}
	for _, c := range res.ColumnsRetyped {
		if slices.Contains(from.Key, c.Name) {
			return report.Usage("diff %s: key column %s is %s at snapshot %d and %s at snapshot %d; diff pairs rows by a key of one type", from.Table, c.Name, c.From, from.Snapshot, c.To, to.Snapshot)
		}
		retyped[c.Name] = c
	}
	var sel, common, types []string
	for i, c := range from.Columns {
		if slices.Contains(res.ColumnsRemoved, c) {
			continue
		}
		e := sqltext.QuoteIdent(c)
		if rc, ok := retyped[c]; ok {
			as := "VARCHAR"
			if NumericType(rc.From) && NumericType(rc.To) {
				as = "DOUBLE"
			}
			e = "CAST(" + e + " AS " + as + ") AS " + e
		}
		sel, common, types = append(sel, e), append(common, c), append(types, from.Types[i])
	}
	for _, k := range from.Key {
		if !slices.Contains(common, k) || !slices.Contains(to.Key, k) || len(from.Key) != len(to.Key) {
			return report.Usage("diff %s: snapshots %d and %d have different keys (%s / %s); diff pairs rows by one key", from.Table, from.Snapshot, to.Snapshot,
				strings.Join(from.Key, ", "), strings.Join(to.Key, ", "))
		}
	}
	if len(common) == 0 {
		return report.Usage("diff %s: snapshots %d and %d share no column (%s / %s)", from.Table, from.Snapshot, to.Snapshot,
			strings.Join(from.Columns, ", "), strings.Join(to.Columns, ", "))
	}
	from.Query = "SELECT " + strings.Join(sel, ", ") + " FROM (" + from.Query + ")"
	to.Query = "SELECT " + strings.Join(sel, ", ") + " FROM (" + to.Query + ")"
	from.Columns, to.Columns, from.Types, to.Types = common, common, types, types
	if !from.Unique {
		// Without a key every column is: the shared ones.
		from.Key, to.Key = common, common
	}
	return nil
}

// NumericType says a DuckDB type is a number.
func NumericType(t string) bool {
	switch t {
	case "TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT", "UTINYINT", "USMALLINT", "UINTEGER", "UBIGINT", "UHUGEINT", "FLOAT", "DOUBLE":
		return true
	}
	return strings.HasPrefix(t, "DECIMAL")
}
