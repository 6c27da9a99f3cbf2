package run

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	"github.com/idem-dev/idem/internal/catalog"
	"github.com/idem-dev/idem/internal/job"
	"github.com/idem-dev/idem/internal/source"
	"github.com/idem-dev/idem/internal/sqltext"
)

// UpstreamChange is one upstream a run pinned: the snapshot the job's
// committed state had pinned (nil before), and the one this run reads.
type UpstreamChange struct {
	Job  string `json:"job"`
	From *int64 `json:"from"`
	To   int64  `json:"to"`
}

// String reads "trips 4 → 5", or "trips 5" when it did not move.
func (c UpstreamChange) String() string {
	switch {
	case c.From == nil:
		return fmt.Sprintf("%s %d (first pinned)", c.Job, c.To)
	case *c.From != c.To:
		return fmt.Sprintf("%s %d → %d", c.Job, *c.From, c.To)
	}
	return fmt.Sprintf("%s %d", c.Job, c.To)
}

// pin pins a job's upstream inputs inside tx, before the run decides: the
// key's input part gains each upstream's {job, snapshot, job_key}, and a
// model's schema part its SELECT's result columns, so that the job key the
// run compares names exactly the rows it reads.
func pin(ctx context.Context, tx *sql.Tx, j *job.Job, p *Prepared, st catalog.State) ([]UpstreamChange, error) {
	pinner, ok := p.input.(source.Pinner)
	if !ok {
		return nil, nil
	}
	// The model's columns are described below: it may call macros.
	if err := p.createMacros(ctx, tx, j); err != nil {
		return nil, err
	}
	up, incremental := p.input.(*source.Upstream)
	incremental = incremental && up.Changes
	if incremental {
		up.Since = pinnedSnapshots(st)
	}
	incrementalPins(j, p, st) // incremental.go
	refs, err := pinner.Pin(ctx, tx)
	if err != nil {
		return nil, err
	}
	p.parts.Upstream = refs
	if incremental {
		changesBatch(p, up, st, refs) // upstream_changes.go
	}
	if j.IsModel() {
		cols, err := modelColumns(ctx, tx, j)
		if err != nil {
			return nil, err
		}
		p.parts.Schema = j.ModelSchemaPart(cols)
		if up, ok := p.input.(*source.Upstream); ok && up.Partitions != nil && up.Partitions.Restricted && st.Parts.Schema != p.parts.Schema {
			// New result columns: the committed rows say nothing of
			// them, so the whole target is rebuilt from every row.
			up.Partitions = &source.Partitions{Fallback: "the model's result columns changed"}
			if refs, err = pinner.Pin(ctx, tx); err != nil {
				return nil, err
			}
		}
	}
	p.key = p.parts.Key()
	before := map[string]int64{}
	if st.HasParts {
		for _, r := range st.Parts.Upstream {
			before[r.Job] = r.Snapshot
		}
	}
	changes := make([]UpstreamChange, len(refs))
	for i, r := range refs {
		changes[i] = UpstreamChange{Job: r.Job, To: r.Snapshot}
		if s, ok := before[r.Job]; ok {
			changes[i].From = &s
		}
	}
	return changes, nil
}

// modelColumns describes a model's SELECT as "name TYPE", in order. A
// model that does not bind (a missing column, a type error) fails here,
// before anything is written, with the model file's name.
func modelColumns(ctx context.Context, tx *sql.Tx, j *job.Job) ([]string, error) {
	cols, err := DescribeColumns(ctx, tx, j.Expand(j.ModelSQL))
	if err != nil {
		return nil, fmt.Errorf("model %s: %w", j.ModelFile, err)
	}
	out := make([]string, len(cols))
	for i, c := range cols {
		out[i] = c.Name + " " + c.Type
	}
	return out, nil
}

// DescribeColumns names and types the result columns of a SELECT, in
// order, without running it.
func DescribeColumns(ctx context.Context, q catalog.Querier, query string) ([]catalog.TargetColumn, error) {
	describe := "SELECT column_name, column_type FROM (DESCRIBE SELECT * FROM (\n" + query + "\n))"
	if err := OneStatement(describe); err != nil {
		return nil, err
	}
	rows, err := q.QueryContext(ctx, describe)
	if err != nil {
		return nil, catalog.TrimSQLError(err)
	}
	defer rows.Close()
	var out []catalog.TargetColumn
	for rows.Next() {
		var c catalog.TargetColumn
		if err := rows.Scan(&c.Name, &c.Type); err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, rows.Err()
}

// checkModelKey fails a model run (exit 1, nothing committed) whose result
// (table: the target, or an incremental run's recomputed rows) has a NULL key or two rows with one key, naming up to three such keys.
func checkModelKey(ctx context.Context, tx *sql.Tx, j *job.Job, table string) error {
	if !j.IsModel() {
		return nil
	}
	keys := make([]string, len(j.Key))
	text := make([]string, len(j.Key))
	nulls := make([]string, len(j.Key))
	for i, k := range j.Key {
		keys[i] = sqltext.QuoteIdent(k)
		text[i] = "coalesce(CAST(" + keys[i] + " AS VARCHAR), 'NULL')"
		nulls[i] = keys[i] + " IS NULL"
	}
	q := "SELECT " + strings.Join(text, " || ', ' || ") + " AS k, count(*) AS n, bool_or(" + strings.Join(nulls, " OR ") + ") AS has_null" +
		" FROM " + sqltext.QuoteIdent(table) + " GROUP BY ALL HAVING count(*) > 1 OR bool_or(" + strings.Join(nulls, " OR ") + ")" +
		" ORDER BY has_null DESC, n DESC, k LIMIT 4"
	rows, err := tx.QueryContext(ctx, q)
	if err != nil {
		return fmt.Errorf("model %s: check key (%s): %w", j.Name, strings.Join(j.Key, ", "), catalog.TrimSQLError(err))
	}
	defer rows.Close()
	var bad []string
	for rows.Next() {
		var k string
		var n int64
		var null bool
		if err := rows.Scan(&k, &n, &null); err != nil {
			return err
		}
		if null {
			bad = append(bad, fmt.Sprintf("(%s) has a NULL", k))
		} else {
			bad = append(bad, fmt.Sprintf("(%s) %d rows", k, n))
		}
	}
	if err := rows.Err(); err != nil {
		return err
	}
	if len(bad) == 0 {
		return nil
	}
	return &KeyError{Job: j.Name, Key: j.Key, Bad: bad}
}

// KeyError refuses a model whose rows repeat a key or hold a NULL in it:
// Bad names up to four such keys with their values, which LogMessage
// leaves out (the run log keeps no row values).
type KeyError struct {
	Job string
	Key []string
	Bad []string
}

func (e *KeyError) Error() string {
	bad, more := e.Bad, ""
	if len(bad) > 3 {
		bad, more = bad[:3], ", ..."
	}
	return fmt.Sprintf("model %s: key (%s) must be unique and not NULL: %s%s; nothing committed", e.Job, strings.Join(e.Key, ", "), strings.Join(bad, "; "), more)
}

// LogMessage is e without the keys' values, for the run log.
func (e *KeyError) LogMessage() string {
	n := fmt.Sprint(len(e.Bad))
	if len(e.Bad) > 3 {
		n = "4 or more"
	}
	return fmt.Sprintf("model %s: key (%s) must be unique and not NULL: %s key value(s) repeated or NULL; nothing committed", e.Job, strings.Join(e.Key, ", "), n)
}
