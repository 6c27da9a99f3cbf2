package run

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"

	"github.com/idem-dev/idem/internal/catalog"
	"github.com/idem-dev/idem/internal/job"
	"github.com/idem-dev/idem/internal/jobkey"
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
//
// states, when not nil, holds the state rows of the upstreams read in tx
// with the job's own (readStates).
func pin(ctx context.Context, tx *sql.Tx, j *job.Job, p *Prepared, st catalog.State, states map[string]catalog.State, cache *guardCache) ([]UpstreamChange, error) {
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
	var refs []jobkey.UpstreamRef
	var err error
	if states != nil && up != nil {
		refs, err = up.PinStates(ctx, tx, states)
	} else {
		refs, err = pinner.Pin(ctx, tx)
	}
	if err != nil {
		return nil, err
	}
	p.parts.Upstream = refs
	if incremental {
		changesBatch(p, up, st, refs) // upstream_changes.go
	}
	if j.IsModel() {
		cols, err := modelColumns(ctx, tx, j, pinner, describeKey(j, p.input, refs, st), cache)
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

// readStates reads the job's own state row and, for a job whose input is
// its upstreams' targets, theirs, in one statement (a statement costs
// DuckDB about 0.4 ms however small): the upstreams' are nil when not
// read.
func readStates(ctx context.Context, tx *sql.Tx, j *job.Job, input any) (catalog.State, map[string]catalog.State, error) {
	up, ok := input.(*source.Upstream)
	if !ok || up.Recorded != nil {
		st, err := catalog.ReadState(ctx, tx, j.Name)
		return st, nil, err
	}
	local := up.Local()
	read, err := catalog.ReadStates(ctx, tx, append([]string{j.Name}, local...))
	if err != nil {
		return catalog.State{}, nil, err
	}
	st := read[j.Name]
	if slices.Contains(local, j.Name) {
		return st, nil, nil
	}
	delete(read, j.Name)
	return st, read, nil
}

// modelColumns describes a model's SELECT as "name TYPE", in order. A
// model that does not bind (a missing column, a type error) fails here,
// before anything is written, with the model file's name.
//
// The answer is a function of what key names (describeKey): with cache it
// is kept (and, signed, across processes: verdicts.go), so a model whose
// SQL and pinned upstream snapshots did not move is not described again:
// a no-op run's statement, its parse and the parser's open.
func modelColumns(ctx context.Context, tx *sql.Tx, j *job.Job, pinner source.Pinner, key *[32]byte, cache *guardCache) ([]string, error) {
	if key != nil {
		if v, ok := cache.get(*key); ok {
			return v.([]string), nil
		}
	}
	if err := pinner.Views(ctx, tx); err != nil {
		return nil, err
	}
	cols, err := DescribeColumns(ctx, tx, j.Expand(j.ModelSQL))
	if err != nil {
		return nil, fmt.Errorf("model %s: %w", j.ModelFile, err)
	}
	out := make([]string, len(cols))
	for i, c := range cols {
		out[i] = c.Name + " " + c.Type
	}
	if key != nil {
		cache.put(*key, out)
		cache.learnt(*key, "describe", string(jobkey.CanonicalJSON(out)))
	}
	return out, nil
}

// describeKey is the guard key of a model's described columns, or nil
// where they are not kept. DuckDB binds the model's SELECT against its
// macros and the relations Pin made, each a view of an upstream's target
// as its state row names it, and the job's own tables, which a model may
// read too: the engine (in every guard key), the expanded SQL, the
// macros' texts, each upstream's job, snapshot and job key, and the
// schema part of the job's own committed state (its target's columns) fix
// the answer. Only plain pins qualify; incremental
// pins (changes, partitions), upstreams in another database and the
// recorded pins of a rerun build their relations otherwise and are
// described every run.
func describeKey(j *job.Job, input any, refs []jobkey.UpstreamRef, st catalog.State) *[32]byte {
	up, ok := input.(*source.Upstream)
	if !ok || up.Recorded != nil || up.Changes || up.Partitions != nil || len(up.External) > 0 {
		return nil
	}
	parts := []string{j.Expand(j.ModelSQL), st.Target, st.Parts.Schema.SHA256, fmt.Sprint(st.Parts.Schema.Version)}
	for _, m := range j.Macros {
		parts = append(parts, m.Name, m.Create)
	}
	for _, r := range refs {
		parts = append(parts, r.Job, fmt.Sprint(r.Snapshot), r.JobKey)
	}
	k := guardKey("describe", parts...)
	return &k
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
