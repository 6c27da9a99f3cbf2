package run

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/idem-dev/idem/internal/catalog"
	"github.com/idem-dev/idem/internal/job"
	"github.com/idem-dev/idem/internal/report"
	"github.com/idem-dev/idem/internal/source"
	"github.com/idem-dev/idem/internal/sqltext"
)

// The replay guard of a pipeline without a position column.
//
// A pipeline with a position column (versioned_changes, orders) guards an
// erased key in its own stage step: a row of the key at or below the
// erasure point gets outcome erased (temp table idem_erased). A pipeline
// without one (merge_by_key, sample, a pipeline of the user's) cannot tell
// an old row of an erased key from a new one, so the runner guards it:
// right after the stage step, every staged row in which the job's erased
// key, or a column of one of its erased subjects, holds an erased value
// gets reason 'erased', and every other column of it (typed values, raw
// values) NULL, so that no later step can store its payload; scrubErased
// then rewrites the run's retained inputs without those rows. An old file
// fed again under a new name thus brings nothing back. Such a job refuses
// an erased key or subject for good.
//
// A job fed by upstream jobs is not guarded here: its input is the
// upstreams' rows, which their own erasure and guard rid of the subject.
// Nor is a model, whose rows are recomputed from its upstreams.

// erasedOutcome is the outcome of a row of an erased key or subject.
const erasedOutcome = "erased"

// guardsErased says whether the runner guards job j against a replay of an
// erased subject (see above).
func guardsErased(j *job.Job) bool {
	return !j.IsModel() && len(j.Input.Upstream) == 0 && j.Pipeline.Position == ""
}

// erasedMatch is what the runner's guard matches: values per column (a row
// goes when one column holds one of its values: single-column keys and
// subject columns) and the erased composite keys (a row goes when every
// column holds its value).
type erasedMatch struct {
	Values map[string][]string   `json:"values"`
	Tuples []map[string][]string `json:"tuples"`
	// what the erasures look in, for the guard's refusal of a staged
	// without them: single columns, and a composite key's columns.
	wanted    []string
	tupleCols []string
}

func (m erasedMatch) empty() bool { return len(m.Values) == 0 && len(m.Tuples) == 0 }

// readErasedMatch finds, in relation from (staged), the values of j's
// erasures: idem.erasures keeps each erased value as sha256(salt || value)
// (a composite key's value is the JSON array of its values), so a value
// staged holds is erased when its hash with an erasure's salt is that
// erasure's key. The match holds those plain values, the input's own; an
// erasure recorded without a salt (a catalog before version 6 read as it
// is) holds the value itself. present are the columns from has.
func readErasedMatch(ctx context.Context, q catalog.Querier, j *job.Job, from string, present map[string]bool) (erasedMatch, error) {
	m := erasedMatch{Values: map[string][]string{}}
	bySnap, err := catalog.ErasuresBySnapshot(ctx, q, j.Name)
	if err != nil {
		return m, err
	}
	keys := j.Pipeline.Key
	if len(keys) == 0 {
		keys = j.Key
	}
	add := func(col, v string) {
		if !slices.Contains(m.Values[col], v) {
			m.Values[col] = append(m.Values[col], v)
		}
	}
	// hashed: per text expression over from, the erasures' (salt, hash).
	type hashed struct {
		cols  []string // the columns of the expression: one, or a composite key's
		pairs [][2]string
	}
	byExpr := map[string]*hashed{}
	want := func(cols []string, e catalog.Erasure) {
		k := strings.Join(cols, "\x00")
		if byExpr[k] == nil {
			byExpr[k] = &hashed{cols: cols}
		}
		byExpr[k].pairs = append(byExpr[k].pairs, [2]string{e.Salt, e.Key})
	}
	for _, s := range slices.Sorted(maps.Keys(bySnap)) {
		for _, e := range bySnap[s] {
			switch {
			case e.Subject != nil && e.Salt == "":
				for _, c := range e.Subject {
					add(c, e.Key)
				}
			case e.Subject != nil:
				for _, c := range e.Subject {
					m.wanted = append(m.wanted, c)
					want([]string{c}, e)
				}
			case len(keys) == 1 && e.Salt == "":
				add(keys[0], e.Key)
			case len(keys) == 1:
				m.wanted = append(m.wanted, keys[0])
				want(keys, e)
			case len(keys) > 1 && e.Salt == "":
				if err := m.addTuple(keys, e.Key); err != nil {
					return m, fmt.Errorf("erasure of job %s at snapshot %d: %w", j.Name, s, err)
				}
			case len(keys) > 1:
				m.tupleCols = keys
				want(keys, e)
			}
		}
	}
	for _, k := range slices.Sorted(maps.Keys(byExpr)) {
		h := byExpr[k]
		texts := make([]string, len(h.cols))
		for i, c := range h.cols {
			if !present[c] {
				texts = nil
				break
			}
			texts[i] = "CAST(" + sqltext.QuoteIdent(c) + " AS VARCHAR)"
		}
		if texts == nil {
			continue // the guard refuses a staged without the columns (guardErased)
		}
		text := texts[0]
		if len(texts) > 1 {
			text = "CASE WHEN " + strings.Join(texts, " IS NOT NULL AND ") + " IS NOT NULL THEN CAST(to_json([" + strings.Join(texts, ", ") + "]) AS VARCHAR) END"
		}
		salts, hashes := make([]string, len(h.pairs)), make([]string, len(h.pairs))
		for i, p := range h.pairs {
			salts[i], hashes[i] = p[0], p[1]
		}
		found, err := catalog.Strings(ctx, q, `SELECT DISTINCT v.t FROM (SELECT DISTINCT `+text+` AS t FROM `+from+`) AS v
			JOIN (SELECT unnest(?::VARCHAR[]) AS salt, unnest(?::VARCHAR[]) AS hash) AS e ON sha256(e.salt || v.t) = e.hash ORDER BY 1`, salts, hashes)
		if err != nil {
			return m, fmt.Errorf("match erasures of job %s: %w", j.Name, catalog.TrimSQLError(err))
		}
		for _, v := range found {
			if len(h.cols) == 1 {
				add(h.cols[0], v)
			} else if err := m.addTuple(h.cols, v); err != nil {
				return m, fmt.Errorf("erasure of job %s: %w", j.Name, err)
			}
		}
	}
	return m, nil
}

// addTuple adds a composite key's erased value, the JSON array of its
// values.
func (m *erasedMatch) addTuple(keys []string, value string) error {
	var parts []string
	if err := json.Unmarshal([]byte(value), &parts); err != nil || len(parts) != len(keys) {
		return fmt.Errorf("key %q is not a value of its key (%s)", value, strings.Join(keys, ", "))
	}
	t := map[string][]string{}
	for i, k := range keys {
		t[k] = []string{parts[i]}
	}
	m.Tuples = append(m.Tuples, t)
	return nil
}

// guardMatch is the temp table where the guard keeps the erased values it
// found in staged, for the scrub of the run's retained inputs after the
// steps (which blank staged's erased rows).
const guardMatch = "idem_guard_match"

// guardErased is the runner's replay guard (see above), run right after the
// stage step. It is a no-op for a job it does not guard or without
// erasures.
func guardErased(ctx context.Context, tx *sql.Tx, j *job.Job) error {
	if !guardsErased(j) {
		return nil
	}
	var n int
	if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM idem.erasures WHERE job = ?`, j.Name).Scan(&n); err != nil || n == 0 {
		return err
	}
	cols, err := textColumn(ctx, tx, `SELECT column_name FROM duckdb_columns() WHERE database_name = 'temp' AND table_name = 'staged' ORDER BY column_index`)
	if err != nil {
		return fmt.Errorf("guard erased subjects of job %s: %w", j.Name, err)
	}
	present := map[string]bool{}
	var blank []string
	for _, c := range cols {
		present[c] = true
		if c != "_row" && c != "reason" {
			blank = append(blank, sqltext.QuoteIdent(c)+" = NULL")
		}
	}
	m, err := readErasedMatch(ctx, tx, j, "staged", present)
	if err != nil {
		return err
	}
	// A column staged lacks (a target column the steps compute) is looked
	// for by the key's erasures alone, which an erasure by subject records
	// for every key the subject's rows had.
	wanted := append(slices.Clone(m.wanted), report.SortedKeys(m.Values)...)
	if len(wanted) > 0 && !slices.ContainsFunc(wanted, func(c string) bool { return present[c] }) {
		slices.Sort(wanted)
		return fmt.Errorf("pipeline %s: staged has none of the columns %s that hold what was erased from job %s: a replay of it could not be told apart; nothing committed", j.Pipeline.Name, strings.Join(slices.Compact(wanted), ", "), j.Name)
	}
	for _, c := range m.tupleCols {
		if !present[c] {
			return fmt.Errorf("pipeline %s: staged lacks a column of job %s's key (%s), whose values were erased: its replays could not be told apart; nothing committed", j.Pipeline.Name, j.Name, strings.Join(m.tupleCols, ", "))
		}
	}
	data, err := json.Marshal(m)
	if err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, "CREATE OR REPLACE TEMP TABLE "+guardMatch+" AS SELECT CAST(? AS VARCHAR) AS m", string(data)); err != nil {
		return fmt.Errorf("guard erased subjects of job %s: %w", j.Name, err)
	}
	if m.empty() {
		return nil
	}
	var or []string
	if w := source.ValuesSQL(m.Values, present); w != "" {
		or = append(or, w)
	}
	for _, t := range m.Tuples {
		if w := source.TupleSQL(t, present); w != "" {
			or = append(or, w)
		}
	}
	if len(or) == 0 {
		return nil
	}
	if !present["reason"] {
		return fmt.Errorf("pipeline %s: %w", j.Pipeline.Name, ErrNoReason)
	}
	// The erasure values are quoted literals, as the erasure's own deletes.
	q := "UPDATE staged SET " + strings.Join(append(blank, "reason = "+sqltext.SQLString(erasedOutcome)), ", ") + " WHERE " + strings.Join(or, " OR ")
	if _, err := tx.ExecContext(ctx, q); err != nil {
		return fmt.Errorf("guard erased subjects of job %s: %w", j.Name, contractError(j, "idem's erasure guard", catalog.TrimSQLError(err)))
	}
	return nil
}

// savedErasedMatch reads what the guard found (guardMatch).
func savedErasedMatch(ctx context.Context, q catalog.Querier) (erasedMatch, error) {
	var m erasedMatch
	var data string
	if err := q.QueryRowContext(ctx, "SELECT m FROM "+guardMatch).Scan(&data); err != nil {
		return m, fmt.Errorf("read the erasure guard's match: %w", err)
	}
	if err := json.Unmarshal([]byte(data), &m); err != nil {
		return m, fmt.Errorf("read the erasure guard's match: %w", err)
	}
	return m, nil
}

// erasedFilters are the filters that drop the rows of erased keys and
// subjects from a guarded job's retained inputs: one by column values, one
// per erased composite key.
func erasedFilters(m erasedMatch) []source.RowFilter {
	var out []source.RowFilter
	if len(m.Values) > 0 {
		out = append(out, source.MatchFilter("", m.Values))
	}
	for _, t := range m.Tuples {
		out = append(out, source.TupleFilter("", t))
	}
	return out
}
