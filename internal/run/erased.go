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
	"github.com/idem-dev/idem/internal/source"
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
	values map[string][]string
	tuples []map[string][]string
}

func (m erasedMatch) empty() bool { return len(m.values) == 0 && len(m.tuples) == 0 }

// readErasedMatch reads the erasures recorded for j: of its key (a
// composite key's as the JSON array of its values) and of subjects by
// their columns.
func readErasedMatch(ctx context.Context, q catalog.Querier, j *job.Job) (erasedMatch, error) {
	m := erasedMatch{values: map[string][]string{}}
	bySnap, err := catalog.ErasuresBySnapshot(ctx, q, j.Name)
	if err != nil {
		return m, err
	}
	keys := j.Pipeline.Key
	if len(keys) == 0 {
		keys = j.Key
	}
	add := func(col, v string) {
		if !slices.Contains(m.values[col], v) {
			m.values[col] = append(m.values[col], v)
		}
	}
	for _, s := range slices.Sorted(maps.Keys(bySnap)) {
		for _, e := range bySnap[s] {
			switch {
			case e.Subject != nil:
				for _, c := range e.Subject {
					add(c, e.Key)
				}
			case len(keys) == 1:
				add(keys[0], e.Key)
			case len(keys) > 1:
				var parts []string
				if err := json.Unmarshal([]byte(e.Key), &parts); err != nil || len(parts) != len(keys) {
					return m, fmt.Errorf("erasure of job %s at snapshot %d: key %q is not a value of its key (%s)", j.Name, s, e.Key, strings.Join(keys, ", "))
				}
				t := map[string][]string{}
				for i, k := range keys {
					t[k] = []string{parts[i]}
				}
				m.tuples = append(m.tuples, t)
			}
		}
	}
	return m, nil
}

// guardErased is the runner's replay guard (see above), run right after the
// stage step. It is a no-op for a job it does not guard or without
// erasures.
func guardErased(ctx context.Context, tx *sql.Tx, j *job.Job) error {
	if !guardsErased(j) {
		return nil
	}
	m, err := readErasedMatch(ctx, tx, j)
	if err != nil || m.empty() {
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
			blank = append(blank, job.QuoteIdent(c)+" = NULL")
		}
	}
	// A column staged lacks (a target column the steps compute) is looked
	// for by the key's erasures alone, which an erasure by subject records
	// for every key the subject's rows had.
	var or []string
	if w := source.ValuesSQL(m.values, present); w != "" {
		or = append(or, w)
	} else if len(m.values) > 0 {
		return fmt.Errorf("pipeline %s: staged has none of the columns %s that hold what was erased from job %s: a replay of it could not be told apart; nothing committed", j.Pipeline.Name, strings.Join(job.SortedKeys(m.values), ", "), j.Name)
	}
	for _, t := range m.tuples {
		w := source.TupleSQL(t, present)
		if w == "" {
			return fmt.Errorf("pipeline %s: staged lacks a column of job %s's key (%s), whose values were erased: its replays could not be told apart; nothing committed", j.Pipeline.Name, j.Name, strings.Join(job.SortedKeys(t), ", "))
		}
		or = append(or, w)
	}
	if !present["reason"] {
		return fmt.Errorf("pipeline %s: %w", j.Pipeline.Name, ErrNoReason)
	}
	// The erasure values are quoted literals, as the erasure's own deletes.
	q := "UPDATE staged SET " + strings.Join(append(blank, "reason = "+job.SQLString(erasedOutcome)), ", ") + " WHERE " + strings.Join(or, " OR ")
	if _, err := tx.ExecContext(ctx, q); err != nil {
		return fmt.Errorf("guard erased subjects of job %s: %w", j.Name, contractError(j, "idem's erasure guard", catalog.TrimSQLError(err)))
	}
	return nil
}

// erasedFilters are the filters that drop the rows of erased keys and
// subjects from a guarded job's retained inputs: one by column values, one
// per erased composite key.
func erasedFilters(m erasedMatch) []source.RowFilter {
	var out []source.RowFilter
	if len(m.values) > 0 {
		out = append(out, source.MatchFilter("", m.values))
	}
	for _, t := range m.tuples {
		out = append(out, source.TupleFilter("", t))
	}
	return out
}
