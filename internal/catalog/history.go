package catalog

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/idem-dev/idem/internal/job"
	"github.com/idem-dev/idem/internal/report"
	"github.com/idem-dev/idem/internal/sqltext"
)

// History: every committed version of every target row, in
// idem."<job>__history", with the snapshot it began in (idem_from) and,
// once closed, the snapshot it ended in (idem_to).
//
// A history is kept in one of two ways:
//
//   - closed rows (every history written before appended rows existed, and
//     jobs without a key): a row is valid at S when idem_from <= S and
//     (idem_to IS NULL or idem_to > S); a write closes each changed row
//     with an UPDATE.
//   - appended rows (idem.meta holds history:<job>, the key and the first
//     snapshot M written this way): a write never updates. For each key it
//     changes at S it appends every target row of that key with idem_from =
//     S, or, when the target holds none, a marker (the key, NULLs, idem_from
//     = idem_to = S: valid at no snapshot). A row of idem_from >= M
//     supersedes every row of its key that began before it, so a row is
//     valid at S when the interval test above holds and no row of its key
//     with M <= idem_from <= S began after it. Rows from before M follow
//     the interval test alone, which is why an existing history needs no
//     migration.
//
// Leaving appended rows (the job lost its key, or changed it) closes every
// superseded row and drops the markers first (closeAppended): the history
// is then all closed rows again.

// HistoryTable is the quoted name of a job's history table.
func HistoryTable(j string) string { return "idem." + sqltext.QuoteIdent(j+"__history") }

// historyFormat says how a job's history is kept: nil for closed rows,
// else the key and the first snapshot of appended rows.
type historyFormat struct {
	Key   []string `json:"key"`
	Since int64    `json:"since"`
}

func historyMetaKey(j string) string { return "history:" + j }

// readHistoryFormat reads how job j's history is kept (nil: closed rows).
func readHistoryFormat(ctx context.Context, q Querier, j string) (*historyFormat, error) {
	var v sql.NullString
	err := q.QueryRowContext(ctx, "SELECT max(value) FROM idem.meta WHERE key = ?", historyMetaKey(j)).Scan(&v)
	if err != nil {
		return nil, fmt.Errorf("read the history format of %s: %w", j, err)
	}
	if !v.Valid {
		return nil, nil
	}
	var f historyFormat
	if err := json.Unmarshal([]byte(v.String), &f); err != nil || len(f.Key) == 0 {
		return nil, fmt.Errorf("history format of %s: bad value %q in idem.meta", j, v.String)
	}
	return &f, nil
}

// writeHistoryFormat records how job j's history is kept (nil: closed rows).
func writeHistoryFormat(ctx context.Context, tx *sql.Tx, j string, f *historyFormat) error {
	if _, err := tx.ExecContext(ctx, "DELETE FROM idem.meta WHERE key = ?", historyMetaKey(j)); err != nil {
		return fmt.Errorf("record the history format of %s: %w", j, err)
	}
	if f == nil {
		return nil
	}
	v, err := json.Marshal(f)
	if err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, "INSERT INTO idem.meta (key, value) VALUES (?, ?)", historyMetaKey(j), string(v)); err != nil {
		return fmt.Errorf("record the history format of %s: %w", j, err)
	}
	return nil
}

// keyMatch is the join condition of key columns between aliases a and b;
// NULL matches NULL, as GROUP BY groups them.
func keyMatch(key []string, a, b string) string {
	return allMatch(quoteAll(key), a, b)
}

func quoteAll(names []string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = sqltext.QuoteIdent(n)
	}
	return out
}

// RecordHistory brings the job's history up to date with the target as
// snapshot S. A job with a key whose steps left temp table idem_touched
// (the key columns of every row they wrote or deleted) appends the rows of
// those keys; once appended, a run without idem_touched appends the keys
// whose rows differ from snapshot S-1. A job without a key, or one that
// never left idem_touched, compares its closed rows with the target whole.
//
// When it appended the rows of idem_touched's keys, RecordHistory returns
// how many distinct keys idem_touched named (touched >= 0): the run counts
// what it wrote from that instead of reading idem_touched a second time.
// Otherwise touched is -1.
func RecordHistory(ctx context.Context, tx *sql.Tx, j *job.Job, snapshot int64) (touched int64, err error) {
	cols, err := TargetColumns(ctx, tx, j.Table)
	if err != nil {
		return -1, err
	}
	tables, err := ReadRunTables(ctx, tx, j.Name)
	if err != nil {
		return -1, err
	}
	return RecordHistoryOf(ctx, tx, j, snapshot, cols, tables)
}

// RecordHistoryOf is RecordHistory with the target's columns as the caller
// read them in tx after the target's last change (a run reads them once
// for its history, packet and snapshot row: each read of duckdb_columns()
// lists every column of the database, about 2 ms in the project case), and
// the tables history looks for as ReadRunTables found them since.
func RecordHistoryOf(ctx context.Context, tx *sql.Tx, j *job.Job, snapshot int64, cols []TargetColumn, tables RunTables) (touched int64, err error) {
	touched = -1
	err = recordHistoryCounted(ctx, tx, j, snapshot, cols, tables, &touched)
	return touched, err
}

func recordHistoryCounted(ctx context.Context, tx *sql.Tx, j *job.Job, snapshot int64, cols []TargetColumn, tables RunTables, counted *int64) error {
	hist := HistoryTable(j.Name)
	exists := tables.History
	target := sqltext.QuoteIdent(j.Table)
	var f *historyFormat
	if !exists {
		// Declared, not CREATE TABLE AS ... LIMIT 0: DuckDB 2.0, on more
		// than one thread, reads no row, in a statement that writes, of a
		// table made empty by CREATE TABLE AS and then filled past a row
		// group (122,880 rows) in one transaction, until a checkpoint
		// (TestHistoryPastARowGroup).
		defs := make([]string, len(cols))
		for i, c := range cols {
			defs[i] = sqltext.QuoteIdent(c.Name) + " " + c.Type
		}
		if _, err := tx.ExecContext(ctx, "CREATE TABLE "+hist+" ("+strings.Join(defs, ", ")+", idem_from BIGINT, idem_to BIGINT)"); err != nil {
			return fmt.Errorf("create history of %s: %w", j.Name, err)
		}
		// A format left by a history dropped by hand describes nothing.
		if err := writeHistoryFormat(ctx, tx, j.Name, nil); err != nil {
			return err
		}
	} else {
		retyped, err := alignHistory(ctx, tx, j.Name, j.Pipeline.Key, cols)
		if err != nil {
			return err
		}
		target = historySource(target, cols, retyped)
		if f, err = readHistoryFormat(ctx, tx, j.Name); err != nil {
			return err
		}
	}
	names := make([]string, len(cols))
	have := map[string]bool{}
	for i, c := range cols {
		names[i] = sqltext.QuoteIdent(c.Name)
		have[c.Name] = true
	}
	key := j.Pipeline.Key
	for _, k := range key {
		if !have[k] {
			key = nil // a key the target lacks names no row: compare whole
		}
	}
	touched := tables.Touched
	if f != nil && !slices.Equal(f.Key, key) {
		if err := closeAppended(ctx, tx, j.Name, f); err != nil {
			return err
		}
		f = nil
	}
	if f == nil && touched && len(key) > 0 {
		f = &historyFormat{Key: slices.Clone(key), Since: snapshot}
		if err := writeHistoryFormat(ctx, tx, j.Name, f); err != nil {
			return err
		}
	}
	if f != nil {
		return appendHistory(ctx, tx, j, f, cols, target, touched, snapshot, counted)
	}
	return compareWhole(ctx, tx, j.Name, names, target, !exists, snapshot)
}

// rowDiffSQL is a query of the rows, columns list, whose number of copies
// differs between queries older and newer, with idem_d the copies older
// holds beyond newer's (negative: newer holds more) and idem_nt newer's
// copies. It is the two EXCEPT ALLs, older's and newer's, in one grouping
// of both: a row is in one of them exactly when idem_d is not 0. NULL
// matches NULL, as EXCEPT ALL matches them.
func rowDiffSQL(list, older, newer string) string {
	return "SELECT " + list + ", sum(idem_d) AS idem_d, count(*) FILTER (WHERE idem_d < 0) AS idem_nt FROM (" +
		"SELECT " + list + ", 1 AS idem_d FROM (" + older + ") UNION ALL SELECT " + list + ", -1 FROM (" + newer + ")" +
		") GROUP BY " + list + " HAVING sum(idem_d) <> 0"
}

// compareWhole brings closed history rows up to date with the target
// (target, a table or parenthesized query, columns names) as snapshot S:
// of a row the open rows hold more copies of than the target, it closes
// as many open copies as the target lacks, and of a row the target holds
// more copies of, it opens the copies beyond the open rows', from the
// target. A history just created (fresh) holds no row: the target's rows
// are its rows.
func compareWhole(ctx context.Context, tx *sql.Tx, j string, names []string, target string, fresh bool, snapshot int64) error {
	hist := HistoryTable(j)
	list := strings.Join(names, ", ")
	s := fmt.Sprint(snapshot)
	run := func(stmts ...string) error {
		for _, q := range stmts {
			if _, err := tx.ExecContext(ctx, q); err != nil {
				return fmt.Errorf("record history of %s: %w", j, TrimSQLError(err))
			}
		}
		return nil
	}
	if fresh {
		return run("INSERT INTO " + hist + " (" + list + ", idem_from, idem_to) SELECT " + list + ", " + s + ", NULL FROM " + target)
	}
	open := "SELECT " + list + " FROM " + hist + " WHERE idem_to IS NULL"
	if err := run("CREATE OR REPLACE TEMP TABLE idem_diff AS " + rowDiffSQL(list, open, "SELECT "+list+" FROM "+target)); err != nil {
		return err
	}
	if slices.ContainsFunc(names, func(n string) bool { return strings.EqualFold(n, `"rowid"`) }) {
		// A column named rowid hides the row ids that close some copies of
		// a row and not others: such a row closes all its open copies and
		// opens the target's copies again instead (the same rows at every
		// snapshot, begun later).
		if err := run(
			"INSERT INTO idem_diff SELECT "+list+", -idem_nt, idem_nt FROM idem_diff WHERE idem_d > 0 AND idem_nt > 0",
			"UPDATE idem_diff SET idem_nt = 0 WHERE idem_d > 0",
		); err != nil {
			return err
		}
	}
	var gone, fewer, opened, partly int64
	if err := tx.QueryRowContext(ctx, "SELECT count(*) FILTER (WHERE idem_d > 0 AND idem_nt = 0), count(*) FILTER (WHERE idem_d > 0 AND idem_nt > 0), count(*) FILTER (WHERE idem_d < 0), count(*) FILTER (WHERE idem_d < 0 AND -idem_d < idem_nt) FROM idem_diff").Scan(&gone, &fewer, &opened, &partly); err != nil {
		return fmt.Errorf("record history of %s: %w", j, TrimSQLError(err))
	}
	var stmts []string
	if gone > 0 {
		// Rows the target no longer holds: every open copy closes.
		stmts = append(stmts, "UPDATE "+hist+" AS h SET idem_to = "+s+" FROM idem_diff AS g WHERE g.idem_d > 0 AND g.idem_nt = 0 AND h.idem_to IS NULL AND "+allMatch(names, "h", "g"))
	}
	if fewer > 0 {
		// Rows the target holds fewer copies of: only the copies beyond
		// the target's close, those that began latest first, so that the
		// snapshot reads as many copies as its target held.
		hl := make([]string, len(names))
		for i, n := range names {
			hl[i] = "h." + n
		}
		stmts = append(stmts, "UPDATE "+hist+" SET idem_to = "+s+" WHERE rowid IN (SELECT idem_rid FROM (SELECT h.rowid AS idem_rid, g.idem_d, row_number() OVER (PARTITION BY "+strings.Join(hl, ", ")+" ORDER BY h.idem_from DESC) AS idem_n FROM "+hist+" AS h JOIN idem_diff AS g ON g.idem_d > 0 AND g.idem_nt > 0 AND "+allMatch(names, "h", "g")+" WHERE h.idem_to IS NULL) WHERE idem_n <= idem_d)")
	}
	if opened > 0 {
		// The opened copies come from the target's rows, as EXCEPT ALL
		// returns them (values that group together are not always the same
		// bytes: -0.0 and 0.0). Where the open rows hold some copies of a
		// row already, only the target's copies beyond them are opened.
		tl := make([]string, len(names))
		for i, n := range names {
			tl[i] = "t." + n
		}
		rows := "SELECT " + strings.Join(tl, ", ") + " FROM " + target + " AS t JOIN idem_diff AS g ON g.idem_d < 0 AND " + allMatch(names, "t", "g")
		if partly > 0 {
			rows = "SELECT " + list + " FROM (SELECT " + strings.Join(tl, ", ") + ", g.idem_d, row_number() OVER (PARTITION BY " + strings.Join(tl, ", ") + ") AS idem_n FROM " + target + " AS t JOIN idem_diff AS g ON g.idem_d < 0 AND " + allMatch(names, "t", "g") + ") WHERE idem_n <= -idem_d"
		}
		stmts = append(stmts, "INSERT INTO "+hist+" ("+list+", idem_from, idem_to) SELECT "+list+", "+s+", NULL FROM ("+rows+")")
	}
	return run(append(stmts, "DROP TABLE idem_diff")...)
}

// allMatch is the join condition of every column names (quoted) between
// aliases a and b; NULL matches NULL.
func allMatch(names []string, a, b string) string {
	m := make([]string, len(names))
	for i, n := range names {
		m[i] = a + "." + n + " IS NOT DISTINCT FROM " + b + "." + n
	}
	return strings.Join(m, " AND ")
}

// appendHistory appends snapshot S to a history of appended rows: every
// target row of each changed key, and a marker for each changed key the
// target no longer holds. The changed keys are idem_touched's when
// touched, else those whose rows differ from snapshot S-1. With
// idem_touched it sets *counted to the number of distinct keys it named.
func appendHistory(ctx context.Context, tx *sql.Tx, j *job.Job, f *historyFormat, cols []TargetColumn, target string, touched bool, snapshot int64, counted *int64) error {
	hist := HistoryTable(j.Name)
	names := make([]string, len(cols))
	for i, c := range cols {
		names[i] = sqltext.QuoteIdent(c.Name)
	}
	list := strings.Join(names, ", ")
	keys := strings.Join(quoteAll(f.Key), ", ")
	s := fmt.Sprint(snapshot)
	// The changed keys, each once (idem_touched may name a key twice), go
	// to idem_changed: its row count is what the run wrote.
	changed := "SELECT DISTINCT " + keys + " FROM idem_touched"
	if !touched {
		prev := pinnedSQL(j.Name, names, f, snapshot-1)
		changed = "SELECT DISTINCT " + keys + " FROM (" + rowDiffSQL(list, prev, "SELECT "+list+" FROM "+target) + ")"
	}
	if _, err := tx.ExecContext(ctx, "CREATE OR REPLACE TEMP TABLE idem_changed AS "+changed); err != nil {
		return fmt.Errorf("record history of %s: %w", j.Name, TrimSQLError(err))
	}
	if touched {
		if err := tx.QueryRowContext(ctx, "SELECT count(*) FROM idem_changed").Scan(counted); err != nil {
			return fmt.Errorf("record history of %s: count the touched keys: %w", j.Name, TrimSQLError(err))
		}
	}
	// One join of the changed keys with the target appends the target's
	// rows of each changed key and, for a changed key the target no longer
	// holds, a marker (its key, NULLs, idem_to = S). A key column comes
	// from the target's row when there is one: a join on IS NOT DISTINCT
	// FROM may pair values that compare equal but are not the same bytes
	// (-0.0 and 0.0).
	sel := make([]string, len(cols))
	for i, c := range cols {
		n := sqltext.QuoteIdent(c.Name)
		if slices.Contains(f.Key, c.Name) {
			sel[i] = "CASE WHEN t.idem_hit THEN t." + n + " ELSE u." + n + " END"
		} else {
			sel[i] = "t." + n
		}
	}
	for _, q := range []string{
		"INSERT INTO " + hist + " (" + list + ", idem_from, idem_to) SELECT " + strings.Join(sel, ", ") + ", " + s + ", CASE WHEN t.idem_hit THEN NULL ELSE " + s + " END FROM idem_changed AS u LEFT JOIN (SELECT " + list + ", true AS idem_hit FROM " + target + ") AS t ON " + keyMatch(f.Key, "t", "u"),
		"DROP TABLE idem_changed",
	} {
		if _, err := tx.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("record history of %s: %w", j.Name, TrimSQLError(err))
		}
	}
	return nil
}

// CloseHistory closes in bulk every row of job j's history that a later
// row of its key supersedes (see RecordHistory) and drops the markers: the
// history is then all closed rows, read by the interval test alone, until
// the next run appends again. Pinned reads return the same rows before and
// after. A job without history, or whose rows are all closed, is left as
// it is.
func CloseHistory(ctx context.Context, tx *sql.Tx, j string) error {
	exists, err := TableExists(ctx, tx, "idem", j+"__history")
	if err != nil || !exists {
		return err
	}
	f, err := readHistoryFormat(ctx, tx, j)
	if err != nil || f == nil {
		return err
	}
	return closeAppended(ctx, tx, j, f)
}

// closeAppended turns a history of appended rows back into closed rows:
// each row a later row of its key supersedes gets that row's idem_from as
// its idem_to, and the markers go. It then records closed rows.
func closeAppended(ctx context.Context, tx *sql.Tx, j string, f *historyFormat) error {
	hist := HistoryTable(j)
	keys := strings.Join(quoteAll(f.Key), ", ")
	m := fmt.Sprint(f.Since)
	next := "SELECT " + keys + ", idem_from, lead(idem_from) OVER (PARTITION BY " + keys + " ORDER BY idem_from) AS idem_next, min(idem_from) OVER (PARTITION BY " + keys + ") AS idem_first FROM (SELECT DISTINCT " + keys + ", idem_from FROM " + hist + " WHERE idem_from >= " + m + ")"
	for _, q := range []string{
		"CREATE OR REPLACE TEMP TABLE idem_next AS " + next,
		// Appended rows end where the next appended row of their key begins.
		"UPDATE " + hist + " AS h SET idem_to = n.idem_next FROM idem_next AS n WHERE h.idem_to IS NULL AND h.idem_from >= " + m + " AND n.idem_next IS NOT NULL AND h.idem_from = n.idem_from AND " + keyMatch(f.Key, "h", "n"),
		// Rows open before M end where the first appended row of their key begins.
		"UPDATE " + hist + " AS h SET idem_to = n.idem_first FROM (SELECT DISTINCT " + keys + ", idem_first FROM idem_next) AS n WHERE h.idem_to IS NULL AND h.idem_from < " + m + " AND " + keyMatch(f.Key, "h", "n"),
		"DELETE FROM " + hist + " WHERE idem_to = idem_from",
		"DROP TABLE idem_next",
	} {
		if _, err := tx.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("close the history rows of %s: %w", j, TrimSQLError(err))
		}
	}
	return writeHistoryFormat(ctx, tx, j, nil)
}

// alignHistory adds to the history table any target column it lacks (after
// a schema change). Columns the target dropped stay, NULL in newer rows. A
// column whose type changed is kept as VARCHAR from then on (retyped): each
// row keeps its value's text, which casts back exactly to the type of the
// snapshot that reads it (PinnedSelect, ChangesSelect), so every snapshot
// reads its own columns. A key column's type cannot change: history finds
// a key's rows by its values.
func alignHistory(ctx context.Context, tx *sql.Tx, j string, key []string, cols []TargetColumn) (retyped map[string]bool, err error) {
	have, err := ExistingColumns(ctx, tx, "idem", j+"__history")
	if err != nil {
		return nil, err
	}
	types := map[string]string{}
	for _, c := range have {
		types[c.Name] = c.Type
	}
	for _, c := range cols {
		t, ok := types[c.Name]
		switch {
		case !ok:
			if _, err := tx.ExecContext(ctx, "ALTER TABLE "+HistoryTable(j)+" ADD COLUMN "+sqltext.QuoteIdent(c.Name)+" "+c.Type); err != nil {
				return nil, fmt.Errorf("add column %s to history of %s: %w", c.Name, j, err)
			}
		case t == c.Type:
		case slices.Contains(key, c.Name):
			return nil, report.Refuse("schema", "%s", KeyRetypeMessage(j, c.Name, t, c.Type))
		default:
			if t != "VARCHAR" {
				if _, err := tx.ExecContext(ctx, "ALTER TABLE "+HistoryTable(j)+" ALTER COLUMN "+sqltext.QuoteIdent(c.Name)+" SET DATA TYPE VARCHAR"); err != nil {
					return nil, fmt.Errorf("keep retyped column %s of %s in its history as text: %w", c.Name, j, TrimSQLError(err))
				}
			}
			if retyped == nil {
				retyped = map[string]bool{}
			}
			retyped[c.Name] = true
		}
	}
	return retyped, nil
}

// KeyRetypeMessage refuses a schema change that retypes a key column.
func KeyRetypeMessage(j, column, from, to string) string {
	return fmt.Sprintf("schema change turns key column %s of %s from %s into %s: history finds a key's rows by its values, so a key column keeps its type; add a column with a new name instead", column, j, from, to)
}

// historySource is what history rows are written from: the target, or
// with retyped columns (alignHistory) the target with those cast to text.
func historySource(target string, cols []TargetColumn, retyped map[string]bool) string {
	if len(retyped) == 0 {
		return target
	}
	sel := make([]string, len(cols))
	for i, c := range cols {
		q := sqltext.QuoteIdent(c.Name)
		sel[i] = q
		if retyped[c.Name] {
			sel[i] = "CAST(" + q + " AS VARCHAR) AS " + q
		}
	}
	return "(SELECT " + strings.Join(sel, ", ") + " FROM " + target + ")"
}

// historyCasts is the select list that reads columns cols (as a snapshot
// recorded them) from a history query (ReadBack), or "" when no column
// needs a cast.
func historyCasts(ctx context.Context, q Querier, j string, cols []TargetColumn) (string, error) {
	have, err := TargetColumnsIn(ctx, q, "idem", j+"__history")
	if err != nil {
		return "", err
	}
	if sel, cast := ReadBack(cols, have); cast {
		return sel, nil
	}
	return "", nil
}

// ReadBack is the select list that reads columns cols, as a snapshot
// recorded them, from rows kept with columns kept (the history's): a
// column kept as another type (text, after a retype: alignHistory) cast
// back to the snapshot's; cast says whether any is.
func ReadBack(cols, kept []TargetColumn) (sel string, cast bool) {
	types := map[string]string{}
	for _, c := range kept {
		types[c.Name] = c.Type
	}
	list := make([]string, len(cols))
	for i, c := range cols {
		n := sqltext.QuoteIdent(c.Name)
		list[i] = n
		if t, ok := types[c.Name]; ok && t != c.Type {
			list[i], cast = "CAST("+n+" AS "+c.Type+") AS "+n, true
		}
	}
	return strings.Join(list, ", "), cast
}

// PinnedSelect returns a SELECT of the target's rows as committed at
// snapshot S, with the columns the snapshot recorded. It reads how the
// job's history is kept, hence q.
func PinnedSelect(ctx context.Context, q Querier, j string, cols []TargetColumn, snapshot int64) (string, error) {
	f, err := readHistoryFormat(ctx, q, j)
	if err != nil {
		return "", err
	}
	names := make([]string, len(cols))
	for i, c := range cols {
		names[i] = sqltext.QuoteIdent(c.Name)
	}
	casts, err := historyCasts(ctx, q, j, cols)
	if err != nil || casts == "" {
		return pinnedSQL(j, names, f, snapshot), err
	}
	return "SELECT " + casts + " FROM (" + pinnedSQL(j, names, f, snapshot) + ")", nil
}

// pinnedSQL is PinnedSelect's text for quoted column names and format f.
// With appended rows, each key's latest appended row at or before S
// (idem_last) hides the rows of that key that began before it.
func pinnedSQL(j string, names []string, f *historyFormat, snapshot int64) string {
	list := strings.Join(names, ", ")
	hist := HistoryTable(j)
	if f == nil {
		return fmt.Sprintf("SELECT %s FROM %s WHERE idem_from <= %d AND (idem_to IS NULL OR idem_to > %d)", list, hist, snapshot, snapshot)
	}
	keys := strings.Join(quoteAll(f.Key), ", ")
	hl := make([]string, len(names))
	for i, n := range names {
		hl[i] = "h." + n
	}
	return fmt.Sprintf("SELECT %s FROM (SELECT * FROM %s WHERE idem_from <= %d) AS h"+
		" LEFT JOIN (SELECT %s, max(idem_from) AS idem_last FROM %s WHERE idem_from >= %d AND idem_from <= %d GROUP BY %s) AS l ON %s"+
		" WHERE (h.idem_to IS NULL OR h.idem_to > %d) AND (l.idem_last IS NULL OR h.idem_from >= l.idem_last)",
		strings.Join(hl, ", "), hist, snapshot,
		keys, hist, f.Since, snapshot, keys, keyMatch(f.Key, "h", "l"),
		snapshot)
}

// RebuildHistory replaces job j's whole history with the rows of table src:
// column idem_snap, then cols, holding the rows of every snapshot from
// `from` to latest (each snapshot's rows, consecutive snapshots). A row
// kept through consecutive snapshots is one history row; rows of latest
// stay open. Snapshots before from are expired and keep nothing. The
// history is kept as closed rows afterwards.
func RebuildHistory(ctx context.Context, tx *sql.Tx, j string, cols []TargetColumn, src string, latest int64) error {
	if err := CloseHistory(ctx, tx, j); err != nil {
		return err
	}
	names := make([]string, len(cols))
	for i, c := range cols {
		names[i] = sqltext.QuoteIdent(c.Name)
	}
	list := strings.Join(names, ", ")
	hist := HistoryTable(j)
	for _, q := range []string{
		"DELETE FROM " + hist,
		fmt.Sprintf("INSERT INTO %s (%s, idem_from, idem_to) SELECT %s, min(idem_snap), CASE WHEN max(idem_snap) = %d THEN NULL ELSE max(idem_snap) + 1 END"+
			" FROM (SELECT *, idem_snap - dense_rank() OVER (PARTITION BY %s, idem_dup ORDER BY idem_snap) AS idem_island"+
			" FROM (SELECT *, row_number() OVER (PARTITION BY idem_snap, %s) AS idem_dup FROM %s))"+
			" GROUP BY %s, idem_dup, idem_island", hist, list, list, latest, list, list, src, list),
	} {
		if _, err := tx.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("rebuild the history of %s: %w", j, TrimSQLError(err))
		}
	}
	return writeHistoryFormat(ctx, tx, j, nil)
}
