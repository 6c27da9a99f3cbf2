package run

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/duckdb/duckdb-go/v2/mapping"

	"github.com/idem-dev/idem/internal/catalog"
	"github.com/idem-dev/idem/internal/job"
	"github.com/idem-dev/idem/internal/jobkey"
	"github.com/idem-dev/idem/internal/source"
	"github.com/idem-dev/idem/internal/sqltext"
)

// Incremental models by partition ([target] incremental = "partition")
// and by key (incremental = "key"). The job package proves at load that
// the model's SELECT can be restricted to some partitions, or keys
// (job.CheckIncremental); source.Upstream finds, from the upstreams'
// history, the partitions (keys) whose upstream rows changed since the
// snapshots the model's state pinned and makes every {{upstream:JOB}} hold
// only their rows. Here the run computes the model over those rows alone
// and writes to the target only the rows that differ in those partitions
// (keys), leaving idem_touched for history; the rows
// are those of a full rebuild, which the run falls back to whenever the
// history cannot say what changed (a first load, a new model version or
// config, new result columns, an upstream rolled back, expired or
// retyped).

// incrementalRows is the temp table of the model's rows in the changed
// partitions (keys).
const incrementalRows = "idem_incr_rows"

// checkIncremental proves an incremental model's SQL at load (see
// job.CheckIncremental) with the process's parser DuckDB (parser.go): its
// json_serialize_sql parses the model, and the aggregate functions are
// the engine's as recorded for its version (incremental_aggregates_gen.go),
// or read from its catalog once a process for another engine. Opening a
// scratch DuckDB and listing duckdb_functions() for each load cost 40-80 ms
// of every run of an incremental model.
func checkIncremental(j *job.Job) error {
	aggregates, err := engineAggregates()
	if err != nil {
		return err
	}
	return j.CheckIncremental(parseOnParser, aggregates)
}

// parseOnParser is ParseQuery on the process's parser DuckDB.
func parseOnParser(query string) (map[string]any, bool, error) {
	out, err := parserStrings("SELECT CAST(json_serialize_sql(" + sqlString(query) + ") AS VARCHAR)")
	if err != nil {
		return nil, false, fmt.Errorf("parse SQL: %w", err)
	}
	if len(out) != 1 {
		return nil, false, fmt.Errorf("parse SQL: %d answers", len(out))
	}
	return readParse(out[0])
}

// sqlString is text as a SQL string literal.
func sqlString(text string) string {
	return "'" + strings.ReplaceAll(text, "'", "''") + "'"
}

// aggregatesRecord is the record of an engine's aggregate functions.
type aggregatesRecord struct {
	Version string
	Names   []string
}

// aggregates are the engine's aggregate functions, lower case, known
// once a process.
var aggregates struct {
	once  sync.Once
	names map[string]bool
	err   error
}

// engineAggregates returns the names of DuckDB's aggregate functions:
// the record of the engine idem is built with (TestEngineAggregatesRecorded
// proves it equal to the catalog), or, for another engine, its catalog's
// answer read once a process.
func engineAggregates() (map[string]bool, error) {
	aggregates.once.Do(func() {
		names := recordedAggregates.Names
		if recordedAggregates.Version != mapping.LibraryVersion() {
			names, aggregates.err = readEngineAggregates()
		}
		aggregates.names = make(map[string]bool, len(names))
		for _, n := range names {
			aggregates.names[n] = true
		}
	})
	return aggregates.names, aggregates.err
}

// readEngineAggregates lists the aggregate functions of the engine's
// catalog.
func readEngineAggregates() ([]string, error) {
	names, err := parserStrings("SELECT DISTINCT lower(function_name) FROM duckdb_functions() WHERE function_type = 'aggregate' ORDER BY ALL")
	if err != nil {
		return nil, fmt.Errorf("list aggregate functions: %w", err)
	}
	return names, nil
}

// incrementalPins makes an incremental model's upstream input restrict its
// relations to the changed partitions (keys), when the job's committed state was
// built by the same model, config and target: otherwise it reads every
// row and the run rebuilds the whole target.
func incrementalPins(j *job.Job, p *Prepared, st catalog.State) {
	up, ok := p.input.(*source.Upstream)
	// An environment's run reads some upstreams from production, whose
	// history is not in the job's database: it rebuilds whole.
	if !ok || j.Incremental == "" || up.Recorded != nil || up.Changes || len(up.External) > 0 {
		return
	}
	up.Partitions = nil
	if !st.HasParts || st.Snapshot == 0 || st.Target != j.Table || st.Parts.Transform != p.parts.Transform ||
		string(jobkey.CanonicalJSON(st.Parts.Config)) != string(jobkey.CanonicalJSON(p.parts.Config)) {
		return
	}
	up.Partitions = &source.Partitions{Columns: j.IncrementalColumns(), ByKey: j.Incremental == job.IncrementalKey, Since: pinnedSnapshots(st)}
}

// incrementalRun is what an incremental run did.
type incrementalRun struct {
	written int64 // rows deleted plus rows inserted
}

// incremental says whether the run recomputes only the changed partitions
// (keys).
func (r *txRun) incremental() *source.Partitions {
	up, ok := r.p.input.(*source.Upstream)
	if !ok || r.opts.FullRefresh || up.Partitions == nil || !up.Partitions.Restricted || !r.exists || !r.st.HasParts ||
		r.st.Target != r.j.Table || r.st.Parts.Schema != r.p.parts.Schema {
		return nil
	}
	return up.Partitions
}

// incrementalSteps stand for the model's step in an incremental run: the
// model over the changed partitions' (keys') upstream rows, then the
// target's rows of those partitions (keys) that differ from it replaced
// (their keys left in idem_touched for history), then staged and outcomes
// as the step makes them. The partition column is a key column
// (job.applyIncremental), so the rows outside the partitions keep their
// keys to themselves.
func (r *txRun) incrementalSteps(ctx context.Context, parts *source.Partitions) error {
	j, tx := r.j, r.tx
	target := sqltext.QuoteIdent(j.Table)
	keys := identList(j.Key)
	match := make([]string, len(j.Key))
	for i, k := range j.Key {
		match[i] = "t." + sqltext.QuoteIdent(k) + " = u." + sqltext.QuoteIdent(k)
	}
	on := strings.Join(match, " AND ")
	cols := parts.Columns
	in := make([]string, len(cols))
	for i, c := range cols {
		in[i] = "t." + sqltext.QuoteIdent(c) + " = p." + sqltext.QuoteIdent(c)
	}
	inParts := " AS t SEMI JOIN " + source.PartitionsTable + " AS p ON " + strings.Join(in, " AND ")
	rowsOf := "CREATE OR REPLACE TEMP TABLE " + incrementalRows + " AS SELECT * FROM (\n" + j.Expand(j.ModelSQL) + "\n) AS idem_model ORDER BY " + keys
	if err := OneStatement(rowsOf); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, rowsOf); err != nil {
		return fmt.Errorf("model %s: %w", j.ModelFile, catalog.TrimSQLError(err))
	}
	// The proof at load says the model's rows lie in the partitions (keys)
	// it read; a row outside them would mean the proof is wrong: refuse
	// rather than write what a full rebuild might not. A row with a NULL
	// there is the model key's check to refuse, as a full rebuild's.
	var outside int64
	if err := tx.QueryRowContext(ctx, "SELECT count(*) FROM "+incrementalRows+" AS t WHERE NOT ("+anyNullOf("t", cols)+") AND NOT EXISTS (SELECT 1 FROM "+
		source.PartitionsTable+" AS p WHERE "+strings.Join(in, " AND ")+")").Scan(&outside); err != nil {
		return fmt.Errorf("model %s: %w", j.ModelFile, catalog.TrimSQLError(err))
	}
	unit := "partition"
	if parts.ByKey {
		unit = "key"
	}
	if outside > 0 {
		return fmt.Errorf("model %s: %d rows of the recomputed %ss lie outside them (another value of %s): the model cannot be recomputed by %s; nothing committed",
			j.ModelFile, outside, unit, strings.Join(cols, ", "), unit)
	}
	stmts := []string{
		"CREATE OR REPLACE TEMP TABLE idem_incr_old AS SELECT t.* FROM " + target + inParts,
		"CREATE OR REPLACE TEMP TABLE idem_touched AS SELECT DISTINCT " + keys + " FROM ((SELECT * FROM idem_incr_old EXCEPT ALL SELECT * FROM " + incrementalRows +
			") UNION ALL (SELECT * FROM " + incrementalRows + " EXCEPT ALL SELECT * FROM idem_incr_old))",
	}
	for _, q := range stmts {
		if _, err := tx.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("model %s: %w", j.ModelFile, catalog.TrimSQLError(err))
		}
	}
	run := &incrementalRun{}
	res, err := tx.ExecContext(ctx, "DELETE FROM "+target+" AS t USING idem_touched AS u WHERE "+on)
	if err != nil {
		return fmt.Errorf("replace %ss of %s: %w", unit, j.Table, catalog.TrimSQLError(err))
	}
	n, _ := res.RowsAffected()
	run.written += n
	res, err = tx.ExecContext(ctx, "INSERT INTO "+target+" SELECT t.* FROM "+incrementalRows+" AS t SEMI JOIN idem_touched AS u ON "+on+" ORDER BY "+keys)
	if err != nil {
		return fmt.Errorf("replace %ss of %s: %w", unit, j.Table, catalog.TrimSQLError(err))
	}
	n, _ = res.RowsAffected()
	run.written += n
	// What the select pipeline's step leaves: every recomputed row staged
	// and accepted.
	for _, q := range []string{
		"DROP TABLE idem_incr_old",
		"CREATE OR REPLACE TEMP VIEW staged AS SELECT * FROM " + incrementalRows,
		"CREATE OR REPLACE TEMP VIEW outcomes AS SELECT 'accepted' AS outcome FROM " + incrementalRows,
	} {
		if _, err := tx.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("model %s: %w", j.ModelFile, catalog.TrimSQLError(err))
		}
	}
	r.incr = run
	return nil
}

// anyNullOf is a condition true when any of columns cols of alias is NULL.
func anyNullOf(alias string, cols []string) string {
	terms := make([]string, len(cols))
	for i, c := range cols {
		terms[i] = alias + "." + sqltext.QuoteIdent(c) + " IS NULL"
	}
	return strings.Join(terms, " OR ")
}
