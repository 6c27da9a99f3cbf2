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
	"github.com/idem-dev/idem/internal/pipeline"
	"github.com/idem-dev/idem/internal/report"
	"github.com/idem-dev/idem/internal/seal"
	"github.com/idem-dev/idem/internal/sqltext"
)

// What the run adds to the checks of a job's SQL at load (reads.go): the
// steps run on one thread, so that every aggregate adds its values in the
// order its input arrives (upstream rows arrive in a canonical order,
// source.Upstream); DuckDB's binder names what each statement scans before
// it runs (EXPLAIN); and the tables the job does not own are the same
// after the steps as before.

// singleThread sets DuckDB's threads to 1 for the steps and returns what
// sets it back. threads is a setting of the database instance, not of the
// transaction, so it is set back whatever the run's end: through tx, or
// when tx refuses it (a failed statement leaves tx refusing every other)
// through another connection of db. Opening that connection costs a few
// milliseconds a run, so it is only the fallback.
func singleThread(ctx context.Context, db *sql.DB, tx *sql.Tx) (func(), error) {
	var threads string
	if err := tx.QueryRowContext(ctx, "SELECT current_setting('threads')").Scan(&threads); err != nil {
		return nil, fmt.Errorf("read threads: %w", err)
	}
	if threads == "1" {
		return func() {}, nil // setting threads restarts DuckDB's workers: about 25 ms each way
	}
	if _, err := tx.ExecContext(ctx, "SET threads = 1"); err != nil {
		return nil, fmt.Errorf("set threads: %w", err)
	}
	return func() {
		ctx, set := context.WithoutCancel(ctx), "SET threads = "+sqltext.SQLString(threads)
		if _, err := tx.ExecContext(ctx, set); err != nil {
			_, _ = db.ExecContext(ctx, set)
		}
	}, nil
}

// sealedRun is the state of the steps' checks during one run.
type sealedRun struct {
	j    *job.Job
	seal *seal.Seal
	// scans are the tables of the database file a statement may scan, as
	// EXPLAIN names them (idem_store.main.<name>, lower case): the job's
	// own and its upstreams' targets.
	scans map[string]bool
	// before is the identity of everything the job does not own, before
	// the steps.
	before map[string]string
	// temp are the temporary relations made so far: idem's and the
	// steps'.
	temp map[string]bool
	// cache keeps the verdicts of explain (guardcache.go); nil keeps none.
	cache *guardCache
	// own is true when every statement of the steps is idem's own
	// (job.ParallelSteps: a built-in pipeline, its placeholders filled from
	// quoted names and whitelisted types, no rule and no sql audit): no
	// such text creates, drops or alters a sequence, an index, a schema or
	// a database, so the identity is not read (two catalog reads a run,
	// 2-5 ms each on a stream batch).
	own bool
}

func newSealedRun(ctx context.Context, tx *sql.Tx, j *job.Job) (*sealedRun, error) {
	s := &sealedRun{j: j, seal: j.Seal(), scans: map[string]bool{}, own: j.ParallelSteps()}
	s.temp = maps.Clone(s.seal.Temp)
	for n := range s.seal.Own {
		s.scans[storeCatalog+".main."+n] = true
	}
	if len(j.Input.Upstream) > 0 {
		// The upstreams' targets in one statement (a statement costs about
		// 0.4 ms however small; a mart reads up to four upstreams).
		states, err := catalog.ReadStates(ctx, tx, j.Input.Upstream)
		if err != nil {
			return nil, fmt.Errorf("read the targets of the upstreams of %s: %w", j.Name, err)
		}
		for _, st := range states {
			if st.Target != "" {
				s.scans[storeCatalog+".main."+strings.ToLower(st.Target)] = true
			}
		}
	}
	if s.own {
		return s, nil
	}
	var err error
	s.before, err = s.identity(ctx, tx)
	return s, err
}

// identity describes the database's schemas, attached databases,
// sequences and the indexes of tables the job does not own: what a step
// could change in the catalog besides tables and views, read at a cost
// that does not grow with the tables of the database (listing tables and
// views, duckdb_tables(), costs about 8 us a table: 2 ms a run in a
// database of 300 jobs). The tables and views the job does not own, and
// their rows, cannot change: every statement a step runs is one DuckDB
// statement idem read (sqltext.Statements, run one at a time), whose target
// idem judges as it runs it (seal.Seal.CheckWrite: only the job's own
// tables and TEMP relations), whose plan's root does what idem read
// (planAgrees) and whose scans DuckDB's binder names (explain: only the
// job's, its upstreams' targets and TEMP); no function a step may call
// writes (the table functions allowed only make rows, and the catalog's
// and the session's are refused). Macros are left to the checks at load,
// which refuse any but TEMP ones.
func (s *sealedRun) identity(ctx context.Context, tx *sql.Tx) (map[string]string, error) {
	own := make([]string, 0, len(s.seal.Own))
	for n := range s.seal.Own {
		own = append(own, sqltext.SQLString(n))
	}
	notOwn := "NOT (schema_name = 'main' AND lower(%s) IN (" + strings.Join(own, ", ") + "))"
	rows, err := tx.QueryContext(ctx, `
		SELECT coalesce(k, ''), coalesce(s, ''), coalesce(n, ''), coalesce(o, ''), coalesce(x, ''), coalesce(d, '') FROM (
		SELECT 'sequence' AS k, schema_name AS s, sequence_name AS n, sequence_oid::VARCHAR AS o, '' AS x, sql AS d
		FROM duckdb_sequences() WHERE database_name = current_database() AND NOT temporary
		UNION ALL
		SELECT 'index', schema_name, index_name, index_oid::VARCHAR, table_name, sql
		FROM duckdb_indexes() WHERE database_name = current_database() AND `+fmt.Sprintf(notOwn, "table_name")+`
		UNION ALL
		SELECT 'schema', schema_name, '', oid::VARCHAR, '', ''
		FROM duckdb_schemas() WHERE database_name = current_database() AND NOT internal
		UNION ALL
		SELECT 'database', database_name, '', '', path, ''
		FROM duckdb_databases()
		)`)
	if err != nil {
		return nil, fmt.Errorf("read the database's tables: %w", err)
	}
	defer rows.Close()
	out := map[string]string{}
	for rows.Next() {
		var kind, schema, name, oid, extra, def string
		if err := rows.Scan(&kind, &schema, &name, &oid, &extra, &def); err != nil {
			return nil, err
		}
		what := kind + " " + schema
		if name != "" {
			what += "." + name
		}
		out[what] += fmt.Sprintf("%s %s %q;", oid, extra, def)
	}
	return out, rows.Err()
}

// verify compares the identity after the steps with the one before: a
// step changed something the job does not own.
func (s *sealedRun) verify(ctx context.Context, tx *sql.Tx) error {
	if s.own {
		return nil
	}
	after, err := s.identity(ctx, tx)
	if err != nil {
		return err
	}
	names := report.SortedKeys(after)
	for _, n := range report.SortedKeys(s.before) {
		if _, ok := after[n]; !ok {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	for _, n := range names {
		b, had := s.before[n]
		a, has := after[n]
		var what string
		switch {
		case !had:
			what = "created " + n
		case !has:
			what = "dropped " + n
		case a != b:
			what = "changed " + n
		default:
			continue
		}
		return report.Usage("job %s: its steps %s, which the job does not own; nothing committed: a step writes only the job's target ({{table}}), its companions ({{table:_suffix}}) and TEMP relations", s.j.Name, what)
	}
	return nil
}

// exec runs one step statement by statement. Before each, DuckDB's binder
// names the tables it scans (EXPLAIN): each must be the job's own, an
// upstream's target or a temporary relation.
func (s *sealedRun) exec(ctx context.Context, tx *sql.Tx, step pipeline.Step) error {
	text := s.j.Expand(step.SQL)
	masked := sqltext.MaskSQL(text)
	spans, err := sqltext.Statements(text, CountStatements)
	if err != nil {
		return report.Usage("job %s: step %s: %v; nothing ran: end every statement with ; outside strings and comments", s.j.Name, step.Name, err)
	}
	for _, sp := range spans {
		stmt := text[sp.Start:sp.End]
		st := seal.ClassifyStatement(stmt, masked[sp.Start:sp.End])
		// What the statement writes, judged again as it runs (the load
		// judged the same text): its plan must then agree (planAgrees).
		if v, ok := s.seal.CheckWrite(st, s.temp); !ok {
			return report.Usage("job %s: step %s line %d: %s; nothing committed: %s", s.j.Name, step.Name, 1+strings.Count(text[:sp.Start+st.At], "\n"), v.Message, v.Fix)
		}
		seal.TrackTemp(st, s.temp)
		switch st.Kind {
		case seal.StmtQuery, seal.StmtCreate, seal.StmtInsert, seal.StmtUpdate, seal.StmtDelete, seal.StmtMerge, seal.StmtTruncate:
			line := 1 + strings.Count(text[:sp.Start+st.At], "\n")
			root, err := s.explain(ctx, tx, step, line, stmt)
			if err != nil {
				return err
			}
			if !planAgrees(st, root) {
				return report.Usage("job %s: step %s line %d: idem reads %s, DuckDB plans %s; nothing committed: write the statement so that its first keywords say what it does",
					s.j.Name, step.Name, line, kindName(st), root)
			}
		}
		if _, err := tx.ExecContext(ctx, stmt); err != nil {
			return &stepFailure{err: err}
		}
	}
	return nil
}

// stepFailure is a statement of a step that failed when it ran (not a
// refusal): stepError words it.
type stepFailure struct{ err error }

func (e *stepFailure) Error() string { return e.err.Error() }
func (e *stepFailure) Unwrap() error { return e.err }

// planAgrees reports whether the operator at the root of DuckDB's plan of
// a statement (root) does what idem read the statement to do (st): a
// query writes nothing, an INSERT inserts, a CREATE creates. What a
// statement writes is judged from idem's reading (seal.Seal), so the two
// must agree.
func planAgrees(st seal.Statement, root string) bool {
	switch st.Kind {
	case seal.StmtInsert:
		return root == "INSERT" || root == "BATCH_INSERT"
	case seal.StmtUpdate:
		return root == "UPDATE"
	case seal.StmtDelete, seal.StmtTruncate:
		return root == "DELETE"
	case seal.StmtMerge:
		return root == "MERGE_INTO"
	case seal.StmtCreate:
		return strings.HasPrefix(root, "CREATE_") || strings.HasPrefix(root, "BATCH_CREATE_")
	case seal.StmtQuery:
		return !writingRoots[root] && !strings.HasPrefix(root, "CREATE_") && !strings.HasPrefix(root, "BATCH_CREATE_")
	}
	return false
}

// writingRoots are the operators of DuckDB's plans that write.
var writingRoots = map[string]bool{
	"INSERT": true, "BATCH_INSERT": true, "UPDATE": true, "DELETE": true, "MERGE_INTO": true,
	"COPY_TO_FILE": true, "BATCH_COPY_TO_FILE": true, "COPY_DATABASE": true, "EXPORT": true,
	"DROP": true, "ALTER": true, "ATTACH": true, "DETACH": true, "SET": true, "RESET": true,
	"LOAD": true, "PRAGMA": true, "TRANSACTION": true, "VACUUM": true, "EXECUTE": true, "PREPARE": true,
}

func kindName(st seal.Statement) string {
	if st.Keyword != "" {
		return st.Keyword
	}
	return "a query"
}

// explain refuses the statement stmt, at line of step, when DuckDB's plan
// of it scans a table that is not the job's, an upstream's target or TEMP.
// It returns the name of the plan's root operator.
//
// A statement that passed is kept in s.cache under its text and the
// tables it may scan: the binder names the same tables for the same text
// as long as the catalog resolves its names the same way, and within the
// process that holds the file only runs change the catalog, each confined
// to its own tables (a name bound once keeps binding to the same relation:
// a new table cannot shadow one that bound, and a step that fails to bind
// is not kept).
func (s *sealedRun) explain(ctx context.Context, tx *sql.Tx, step pipeline.Step, line int, stmt string) (string, error) {
	var plan, kind string
	if err := OneStatement(stmt); err != nil {
		return "", report.Usage("job %s: step %s line %d: %v", s.j.Name, step.Name, line, err)
	}
	var k [32]byte
	if s.cache != nil {
		k = guardKey("explain", stmt, strings.Join(report.SortedKeys(s.scans), "\x00"))
		if root, ok := s.cache.get(k); ok {
			return root.(string), nil
		}
	}
	if err := tx.QueryRowContext(ctx, "EXPLAIN (FORMAT json) "+stmt).Scan(&kind, &plan); err != nil {
		return "", &stepFailure{err: err}
	}
	var nodes []any
	if err := json.Unmarshal([]byte(plan), &nodes); err != nil {
		return "", fmt.Errorf("read the plan of step %s: %w", step.Name, err)
	}
	root := ""
	if len(nodes) == 1 {
		if m, ok := nodes[0].(map[string]any); ok {
			root, _ = m["name"].(string)
		}
	}
	// DuckDB names a write BATCH_INSERT, BATCH_CREATE_TABLE_AS... when it
	// plans it for more than one thread: the same operation (planAgrees
	// takes both), named one way so that the verdict kept for the text
	// (idem.verdicts) is the same whatever the threads.
	root = strings.TrimPrefix(root, "BATCH_")
	var bad string
	sqltext.WalkJSON(nodes, func(m map[string]any) {
		info, _ := m["extra_info"].(map[string]any)
		t, _ := info["Table"].(string)
		lower := strings.ToLower(strings.ReplaceAll(t, `"`, ""))
		if t == "" || bad != "" || strings.HasPrefix(lower, "temp.") || s.scans[lower] {
			return
		}
		bad = t
	})
	if bad == "" {
		s.cache.put(k, root)
		s.cache.learnt(k, "explain", root)
		return root, nil
	}
	return "", report.Usage("job %s: step %s line %d reads table %s (as DuckDB binds the statement), which is neither the job's nor a declared upstream's; nothing committed: declare the job it belongs to in [input] upstream and read it as {{upstream:NAME}}",
		s.j.Name, step.Name, line, bad)
}

// SingleThread sets DuckDB's threads to 1 inside tx, as the steps of a run
// run, and returns what sets it back: work outside a run (an erasure
// recomputing a model) gives the bytes a run gives.
func (d *DB) SingleThread(ctx context.Context, tx *sql.Tx) (func(), error) {
	return singleThread(ctx, d.sql, tx)
}

// modelOrderFree is ModelOrderFree's answer for a run of j with opts:
// false for a run that takes its rows from another database (RowsFrom).
func modelOrderFree(ctx context.Context, q catalog.Querier, j *job.Job, opts RunOptions) (bool, error) {
	if opts.RowsFrom != "" || !j.IsModel() {
		return false, nil
	}
	ok, _, err := ModelOrderFree(ctx, q, j)
	return ok, err
}

// ModelOrderFree reports whether job j is a model whose SELECT gives the
// same rows whatever the order its input rows arrive in, as DuckDB's bound
// plan of it shows (sqltext.OrderFree: no sum of DOUBLE, no order-dependent
// aggregate or window, no LIMIT, no sample, no DISTINCT ON), with no
// quality rule and no sql audit: its steps then run on the job's threads
// and give the bytes one thread gives. why names what keeps a model on one
// thread. The model's upstream relations must exist in q (a run's
// transaction, after the input is staged).
func ModelOrderFree(ctx context.Context, q catalog.Querier, j *job.Job) (ok bool, why string, err error) {
	if !j.IsModel() || len(j.Rules) > 0 {
		return false, "not a model", nil
	}
	for _, a := range j.Audits {
		if a.SQL != "" {
			return false, "a sql audit", nil
		}
	}
	model := j.Expand(j.ModelSQL)
	if err := OneStatement(model); err != nil {
		return false, "", err
	}
	var text string
	if err := q.QueryRowContext(ctx, "SELECT CAST(json_serialize_plan(?::VARCHAR) AS VARCHAR)", model).Scan(&text); err != nil {
		return false, "", fmt.Errorf("plan model of %s: %w", j.Name, err)
	}
	var parsed struct {
		Error bool  `json:"error"`
		Plans []any `json:"plans"`
	}
	if err := json.Unmarshal([]byte(text), &parsed); err != nil {
		return false, "", fmt.Errorf("plan model of %s: %w", j.Name, err)
	}
	if parsed.Error {
		return false, "no plan", nil // the step fails or binds otherwise: one thread
	}
	ok, why = sqltext.OrderFree(parsed.Plans)
	return ok, why, nil
}
