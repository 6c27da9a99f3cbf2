package history

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/idem-dev/idem/internal/catalog"
	"github.com/idem-dev/idem/internal/job"
	"github.com/idem-dev/idem/internal/pipeline"
	"github.com/idem-dev/idem/internal/report"
	"github.com/idem-dev/idem/internal/run"
	"github.com/idem-dev/idem/internal/source"
	"github.com/idem-dev/idem/internal/sqltext"
)

// What an erasure matches (eraseMatch) and how it finds and removes the
// rows in a job's tables and retained inputs (eraser).

// companionTables are the tables the job's schema DDL creates beside the
// target ({{table:_suffix}}) that exist and hold the key column (any, with
// keyCol "").
func companionTables(ctx context.Context, q catalog.Querier, j *job.Job, keyCol string) ([]string, error) {
	seen := map[string]bool{}
	var out []string
	for _, m := range pipeline.Companion.FindAllStringSubmatch(j.DDL, -1) {
		name := j.Table + m[1]
		if seen[name] {
			continue
		}
		seen[name] = true
		exists, err := catalog.TableExists(ctx, q, "main", name)
		if err != nil {
			return nil, err
		}
		if !exists {
			continue // a view, or not created
		}
		cols, err := catalog.TargetColumns(ctx, q, name)
		if err != nil {
			return nil, err
		}
		for _, c := range cols {
			if keyCol == "" || c.Name == keyCol {
				out = append(out, name)
				break
			}
		}
	}
	return out, nil
}

// eraseMatch is what an erasure removes: the rows in which a column of
// values holds one of its values. By key it is {key: [K]}; by subject, the
// subject columns with the value, and (once resolveKeys has run) the
// pipeline's key with the values the subject's rows had.
type eraseMatch struct {
	value   string
	subject []string // nil: an erasure by key
	keyCol  string   // the pipeline's one key column, or ""
	values  map[string][]string
	// all says a row matches only when every column of values holds its
	// value: a composite key (value is then its JSON array, KeyOf).
	all bool
}

// KeyOf is the key value of job j that idem erase --key names by parts:
// the value itself for a key of one column; for a composite key, each
// column as COL=VALUE, every column once, given as the JSON array of the
// values in key order (what idem.erasures records).
func KeyOf(j *job.Job, parts []string) (string, error) {
	keys := keyColumns(j)
	switch {
	case len(keys) == 0:
		return "", report.Usage("erase --key: job %s has no key; declare [privacy] subject and erase with --subject", j.Name)
	case len(keys) == 1:
		if len(parts) != 1 {
			return "", report.Usage("erase --key: job %s has one key column (%s): give one --key VALUE, not %d", j.Name, keys[0], len(parts))
		}
		return parts[0], nil
	}
	byCol := map[string]string{}
	for _, p := range parts {
		col, v, ok := strings.Cut(p, "=")
		if !ok || !slices.Contains(keys, col) {
			return "", report.Usage("erase --key %q: job %s has the composite key (%s): give each column as --key COLUMN=VALUE", p, j.Name, strings.Join(keys, ", "))
		}
		if _, dup := byCol[col]; dup {
			return "", report.Usage("erase --key: column %s of job %s's key is given twice", col, j.Name)
		}
		byCol[col] = v
	}
	values := make([]string, len(keys))
	for i, k := range keys {
		v, ok := byCol[k]
		if !ok {
			return "", report.Usage("erase --key: job %s's key is (%s); --key %s=VALUE is missing", j.Name, strings.Join(keys, ", "), k)
		}
		values[i] = v
	}
	data, err := json.Marshal(values)
	return string(data), err
}

// keyTuple reads the JSON array KeyOf gives for j's composite key.
func keyTuple(j *job.Job, key string) (map[string][]string, error) {
	keys := keyColumns(j)
	var values []string
	if err := json.Unmarshal([]byte(key), &values); err != nil || len(values) != len(keys) {
		return nil, report.Usage("erase --key %s: job %s has the composite key (%s): give each column as --key COLUMN=VALUE", key, j.Name, strings.Join(keys, ", "))
	}
	out := map[string][]string{}
	for i, k := range keys {
		out[k] = []string{values[i]}
	}
	return out, nil
}

// keyColumns are job j's key: its pipeline's, or a generic pipeline's
// declared in the job file.
func keyColumns(j *job.Job) []string {
	if len(j.Pipeline.Key) > 0 {
		return j.Pipeline.Key
	}
	return j.Key
}

// oneKeyColumn is j's key column when its key has one, else "".
func oneKeyColumn(j *job.Job) string {
	if keys := keyColumns(j); len(keys) == 1 {
		return keys[0]
	}
	return ""
}

// eraseMatchOf checks what opts ask to erase from j.
func eraseMatchOf(j *job.Job, opts EraseOptions) (*eraseMatch, error) {
	keys := keyColumns(j)
	m := &eraseMatch{values: map[string][]string{}, keyCol: oneKeyColumn(j)}
	switch {
	case opts.Key != "" && opts.Subject != "":
		return nil, report.Usage("erase takes --key K or --subject VALUE, not both")
	case opts.Subject != "":
		m.value, m.subject = opts.Subject, opts.SubjectColumns
		if m.subject == nil {
			m.subject = j.Privacy.Subject
		}
		if len(m.subject) == 0 {
			return nil, report.Usage("erase --subject needs the job to name its subject columns: %s has no [privacy] subject (for example subject = [\"customer_id\"]); or erase a key with --key", j.Name)
		}
		for _, c := range m.subject {
			m.values[c] = []string{opts.Subject}
		}
	case opts.Key != "" && len(keys) > 1:
		tuple, err := keyTuple(j, opts.Key)
		if err != nil {
			return nil, err
		}
		m.value, m.values, m.all = opts.Key, tuple, true
	case opts.Key != "":
		if m.keyCol == "" {
			return nil, report.Usage("erase --key needs a job with a key; %s has none: declare [privacy] subject and erase with --subject", j.Name)
		}
		m.value = opts.Key
		m.values[m.keyCol] = []string{opts.Key}
	default:
		return nil, report.Usage("erase needs --key K or --subject VALUE")
	}
	return m, nil
}

// filter is the match as a filter of retained files, reading posCol.
func (m *eraseMatch) filter(posCol string) source.RowFilter {
	if m.all {
		return source.TupleFilter(posCol, m.values)
	}
	if m.subject == nil {
		return source.KeyFilter(m.keyCol, posCol, m.value)
	}
	return source.MatchFilter(posCol, m.values)
}

// where is the match as a SQL condition over the columns present; "" when
// none of them is (with all, when one is missing).
func (m *eraseMatch) where(present map[string]bool) string {
	if m.all {
		return source.TupleSQL(m.values, present)
	}
	return source.ValuesSQL(m.values, present)
}

// eraser is what the steps of an erasure share: the result so far, the
// match, the position column, the highest valid position seen (and per key
// by subject) and whether any row matched.
type eraser struct {
	res    *EraseResult
	m      *eraseMatch
	posCol string
	maxPos sql.NullInt64
	keyPos map[string]sql.NullInt64
	found  bool
}

func (e *eraser) seePos(p sql.NullInt64) {
	e.maxPos = source.MaxPosition(e.maxPos, p)
}

// place is a table an erasure deletes from: its label in the result, its
// quoted name and its columns.
type place struct {
	label, name string
	cols        map[string]bool
}

// places are the target, its history and the companions. The target must
// hold one of the columns matched.
func (e *eraser) places(ctx context.Context, tx *sql.Tx, j *job.Job) ([]place, error) {
	matchCol := e.m.keyCol
	if e.m.subject != nil {
		matchCol = ""
	}
	places, err := jobPlaces(ctx, tx, j, matchCol)
	if err != nil {
		return nil, err
	}
	if e.m.where(places[0].cols) == "" {
		return nil, report.Usage("erase from job %s: target %s has none of the columns %s", j.Name, j.Table, strings.Join(slices.Sorted(maps.Keys(e.m.values)), ", "))
	}
	return places, nil
}

// jobPlaces are the tables of job j that hold its rows, each with its
// columns: the target first, its history, and the companions that hold
// keyCol (every companion with keyCol "").
func jobPlaces(ctx context.Context, q catalog.Querier, j *job.Job, keyCol string) ([]place, error) {
	tables, err := companionTables(ctx, q, j, keyCol)
	if err != nil {
		return nil, err
	}
	places := []place{{label: j.Table, name: sqltext.QuoteIdent(j.Table)}}
	if ok, err := catalog.TableExists(ctx, q, "idem", j.Name+"__history"); err != nil {
		return nil, err
	} else if ok {
		places = append(places, place{label: "history", name: catalog.HistoryTable(j.Name)})
	}
	for _, t := range tables {
		if t != j.Table {
			places = append(places, place{label: t, name: sqltext.QuoteIdent(t)})
		}
	}
	for i := range places {
		cols, err := columnsOf(ctx, q, places[i].name)
		if err != nil {
			return nil, err
		}
		places[i].cols = cols
	}
	return places, nil
}

// resolveKeys adds to an erasure by subject the values of the pipeline's
// key that the subject's rows have in any table: every version of those
// records goes, and each key is guarded against an older batch.
func (e *eraser) resolveKeys(ctx context.Context, tx *sql.Tx, places []place) error {
	if e.m.subject == nil || e.m.keyCol == "" || e.m.all {
		return nil
	}
	keys := map[string]bool{}
	for _, p := range places {
		where := e.m.where(p.cols)
		if where == "" || !p.cols[e.m.keyCol] {
			continue
		}
		rows, err := tx.QueryContext(ctx, "SELECT DISTINCT CAST("+sqltext.QuoteIdent(e.m.keyCol)+" AS VARCHAR) FROM "+p.name+" WHERE "+where+" AND "+sqltext.QuoteIdent(e.m.keyCol)+" IS NOT NULL")
		if err != nil {
			return fmt.Errorf("erase from %s: %w", p.label, catalog.TrimSQLError(err))
		}
		for rows.Next() {
			var k string
			if err := rows.Scan(&k); err != nil {
				rows.Close()
				return err
			}
			keys[k] = true
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
	}
	if len(keys) > 0 {
		e.m.values[e.m.keyCol] = slices.Sorted(maps.Keys(keys))
	}
	return nil
}

// fromTables deletes the matched rows from the target, its history and the
// companions, noting the highest valid position they held (per key).
func (e *eraser) fromTables(ctx context.Context, tx *sql.Tx, places []place) error {
	for _, p := range places {
		where := e.m.where(p.cols)
		if where == "" {
			continue
		}
		if p.cols[e.posCol] && e.m.keyCol != "" && p.cols[e.m.keyCol] {
			// A row's position counts only where the pipeline judged it
			// valid: a table that stores outcomes keeps invalid rows as
			// received ("1e18"), and their outcome says so.
			valid := ""
			if p.cols["outcome"] {
				valid = " AND coalesce(outcome NOT LIKE 'invalid%', false)"
			}
			if err := e.positions(ctx, tx, p, where+valid); err != nil {
				return err
			}
		}
		r, err := tx.ExecContext(ctx, "DELETE FROM "+p.name+" WHERE "+where)
		if err != nil {
			return fmt.Errorf("erase from %s: %w", p.label, catalog.TrimSQLError(err))
		}
		n, _ := r.RowsAffected()
		e.res.Removed[p.label] = n
		e.found = e.found || n > 0
	}
	return nil
}

// positions reads the highest valid position of each key among the rows
// of p that match where.
func (e *eraser) positions(ctx context.Context, tx *sql.Tx, p place, where string) error {
	rows, err := tx.QueryContext(ctx, "SELECT CAST("+sqltext.QuoteIdent(e.m.keyCol)+" AS VARCHAR), max("+source.PositionSQL("CAST("+sqltext.QuoteIdent(e.posCol)+" AS VARCHAR)")+") FROM "+p.name+" WHERE "+where+" GROUP BY 1")
	if err != nil {
		return fmt.Errorf("erase from %s: %w", p.label, catalog.TrimSQLError(err))
	}
	defer rows.Close()
	for rows.Next() {
		var k sql.NullString
		var pos sql.NullInt64
		if err := rows.Scan(&k, &pos); err != nil {
			return err
		}
		e.seePos(pos)
		if k.Valid {
			e.keyPos[k.String] = source.MaxPosition(e.keyPos[k.String], pos)
		}
	}
	return rows.Err()
}

// fromInputs rewrites every retained input of the snapshots without the
// key's rows. It returns each input's replacement (itself when it held no
// such row).
func (e *eraser) fromInputs(ctx context.Context, d *run.DB, tx *sql.Tx, j *job.Job, snaps []*catalog.SnapshotRow) (map[string]catalog.InputRef, error) {
	rewritten := map[string]catalog.InputRef{}
	// An expired snapshot's inputs may be gone from the store (idem
	// expire): there is nothing left of the subject to rewrite.
	retained, err := catalog.RetainedSums(ctx, tx)
	if err != nil {
		return nil, err
	}
	for _, s := range snaps {
		format := s.Inputs.Format
		if format == "" {
			format = j.Input.Format
		}
		for _, f := range s.Inputs.Files {
			if _, done := rewritten[f.SHA256]; done {
				continue
			}
			if !retained[f.SHA256] {
				rewritten[f.SHA256] = f
				continue
			}
			rw, pos, err := source.Rewrite(ctx, tx, d.Path(), f, format, e.m.filter(e.posCol))
			if err != nil {
				return nil, err
			}
			// A retained input's rows carry no verdict; where the pipeline
			// stores every row's outcome, the position comes from there.
			if j.Pipeline.OutcomesTable == "" && e.m.subject == nil {
				e.seePos(pos)
			}
			if rw == nil {
				rewritten[f.SHA256] = f
				continue
			}
			e.found = true
			rewritten[f.SHA256] = catalog.InputRef{SHA256: rw.New, Bytes: rw.Bytes, Name: f.Name}
			e.res.Inputs = append(e.res.Inputs, *rw)
		}
	}
	return rewritten, nil
}

// repoint points every snapshot row at the rewritten inputs and records
// them; it returns the retained copies no row names any more, to delete
// after the commit.
func repoint(ctx context.Context, d *run.DB, tx *sql.Tx, j *job.Job, snaps []*catalog.SnapshotRow, rewritten map[string]catalog.InputRef, inputs []source.RewrittenInput) ([]string, error) {
	var stale []string
	if len(inputs) > 0 {
		for _, s := range snaps {
			changed := false
			for i, f := range s.Inputs.Files {
				if nf := rewritten[f.SHA256]; nf.SHA256 != f.SHA256 {
					s.Inputs.Files[i] = nf
					changed = true
				}
			}
			if !changed {
				continue
			}
			if err := catalog.SetSnapshotInputs(ctx, tx, j.Name, s.Snapshot, s.Inputs); err != nil {
				return nil, fmt.Errorf("erase: update inputs of snapshot %d: %w", s.Snapshot, err)
			}
		}
		for _, rw := range inputs {
			if err := catalog.RecordInput(ctx, tx, rw.New, rw.Bytes); err != nil {
				return nil, fmt.Errorf("erase: record input: %w", err)
			}
			refs, err := catalog.InputReferences(ctx, tx, rw.Old)
			if err != nil {
				return nil, fmt.Errorf("erase: count references to input: %w", err)
			}
			if refs == 0 {
				if err := catalog.ForgetInput(ctx, tx, rw.Old); err != nil {
					return nil, fmt.Errorf("erase: forget input: %w", err)
				}
				stale = append(stale, source.RetainedPath(d.Path(), rw.Old))
			}
		}
	}
	return stale, nil
}

func columnsOf(ctx context.Context, q catalog.Querier, qualified string) (map[string]bool, error) {
	cols, err := catalog.ColumnSet(ctx, q, qualified)
	if err != nil {
		return nil, fmt.Errorf("columns of %s: %w", qualified, err)
	}
	return cols, nil
}

// scrubRejects drops the prefix a snapshot keeps of a rejected stream
// record when it holds one of the values erased: such a record was never
// a row, so only its prefix could hold the subject.
func scrubRejects(ctx context.Context, tx *sql.Tx, j *job.Job, snaps []*catalog.SnapshotRow, m *eraseMatch) error {
	for _, s := range snaps {
		changed := false
		for i, r := range s.Inputs.Rejects {
			text, err := strconv.Unquote(r.Prefix)
			if err != nil {
				text = r.Prefix
			}
			for _, vs := range m.values {
				for _, v := range vs {
					if r.Prefix != "" && (strings.Contains(text, v) || strings.Contains(r.Prefix, v)) {
						s.Inputs.Rejects[i].Prefix = ""
						changed = true
					}
				}
			}
		}
		if changed {
			if err := catalog.SetSnapshotInputs(ctx, tx, j.Name, s.Snapshot, s.Inputs); err != nil {
				return fmt.Errorf("erase: scrub the rejects of snapshot %d: %w", s.Snapshot, err)
			}
		}
	}
	return nil
}
