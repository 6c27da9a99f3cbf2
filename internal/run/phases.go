package run

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/idem-dev/idem/internal/catalog"
	"github.com/idem-dev/idem/internal/job"
	"github.com/idem-dev/idem/internal/pipeline"
	"github.com/idem-dev/idem/internal/report"
	"github.com/idem-dev/idem/internal/source"
)

// txRun is one run inside its transaction: what the phases of runTx share.
type txRun struct {
	d    *DB
	tx   *sql.Tx
	j    *job.Job
	p    *Prepared
	opts RunOptions
	// learn collects the guard verdicts kept once the run commits.
	learn *guardLearn

	res      *Result
	st       catalog.State // the job's state row as the run found it
	exists   bool          // the target table existed
	snapshot int64         // the snapshot this run commits
	counts   map[string]int64
	part     *partitionRun   // a partitioned job's run (partitions.go)
	incr     *incrementalRun // an incremental model's run (incremental.go)
	// cols are the target's columns once the steps are done (columns).
	cols []catalog.TargetColumn
}

// columns reads the target's columns once, after every phase that may
// change them (steps, partitions): history, the release packet and the
// snapshot row take the same list (duckdb_columns() lists every column of
// the database: about 2 ms a read in the project case, three a commit).
// The steps left the target, so it is looked up alone (ExistingColumns).
func (r *txRun) columns(ctx context.Context) ([]catalog.TargetColumn, error) {
	if r.cols == nil {
		cols, err := catalog.ExistingColumns(ctx, r.tx, "main", r.j.Table)
		if err != nil {
			return nil, err
		}
		r.cols = cols
	}
	return r.cols, nil
}

// guards reads the job's state row and runs every guard (decide).
func (r *txRun) guards(ctx context.Context) (bool, error) {
	res, st, exists, nothing, err := r.d.decide(ctx, r.tx, r.j, r.p, r.opts, true, false, r.learn)
	r.res, r.st, r.exists, r.snapshot = res, st, exists, st.Snapshot+1
	return !nothing, err
}

// retain copies the input files into the retained-input store and records
// them.
func (r *txRun) retain(ctx context.Context) (bool, error) {
	done := r.opts.Progress.Start("retain input")
	r.p.retained = true
	err := source.Retain(ctx, r.d.path, r.p.files, r.opts.Progress)
	done()
	if err != nil {
		return false, err
	}
	for _, f := range r.p.files {
		if err := catalog.RecordInput(ctx, r.tx, f.SHA256, f.Size); err != nil {
			return false, fmt.Errorf("record input %s: %w", f.Path, err)
		}
	}
	return true, nil
}

// stage binds the params and idem's variables and stages the input as view
// input. An input with nothing past its position skips the run.
func (r *txRun) stage(ctx context.Context) (bool, error) {
	if err := bindVariables(ctx, r.tx, r.j, r.p, r.snapshot); err != nil {
		return false, err
	}
	// The macros the job calls, for its steps, rules and audits (macros.go).
	if err := r.p.createMacros(ctx, r.tx, r.j); err != nil {
		return false, err
	}
	in, err := r.p.input.Stage(ctx, r.tx, r.p.in)
	if err != nil {
		return false, err
	}
	r.res.IgnoredColumns = in.IgnoredColumns
	if in.Empty {
		r.res.Decision = report.DecisionSkipped // the input holds nothing past the cursor
		return false, nil
	}
	return true, nil
}

// steps gives the steps the erased keys, builds the target when its schema
// changed, and runs the pipeline's steps, the quality rules after the
// first.
func (r *txRun) steps(ctx context.Context) (bool, error) {
	j, st, tx := r.j, r.st, r.tx
	r.res.FullRefresh = r.opts.FullRefresh
	if err := catalog.PrepareErasures(ctx, tx, j); err != nil {
		return false, err
	}
	if err := r.keepPartitions(ctx); err != nil { // partitions.go
		return false, err
	}
	if err := replaceAll(ctx, tx, j, r.exists); err != nil {
		return false, err
	}
	// The steps are sealed (sealrun.go): one thread (unless every
	// statement is idem's own, job.ParallelSteps, or the job is a model
	// DuckDB's bound plan proves order-free, ModelOrderFree),
	// binder-checked scans, and the tables the job does not own the same
	// after them.
	sealed, err := newSealedRun(ctx, tx, j)
	if err != nil {
		return false, err
	}
	sealed.cache = r.d.guards
	restore := func() {}
	parallel := j.ParallelSteps()
	if !parallel {
		if _, pinned := r.p.input.(source.Pinner); pinned {
			parallel = r.p.orderFree // decided before the upstreams were copied (decide)
		} else if parallel, err = modelOrderFree(ctx, tx, j, r.opts); err != nil {
			return false, err
		}
	}
	if !parallel {
		if restore, err = singleThread(ctx, r.d.sql, tx); err != nil {
			return false, err
		}
	}
	defer restore()
	rebuild := !r.exists || !st.HasParts || st.Parts.Schema != r.p.parts.Schema || st.Target != j.Table
	if rebuild {
		if err := r.d.buildTarget(ctx, tx, j, r.exists && st.Target == j.Table); err != nil {
			return false, err
		}
	}
	keyTable := j.Table
	steps, exec := j.Steps, sealed.exec
	if r.opts.RowsFrom != "" && j.IsModel() {
		// idem's own copy of rows another database holds (promote): the
		// seal would refuse its read of that database, which is the point.
		// An incremental model's whole target is copied.
		cp, err := j.ModelWith("SELECT * FROM " + r.opts.RowsFrom)
		if err != nil {
			return false, err
		}
		steps, exec = cp.Steps, func(ctx context.Context, tx *sql.Tx, step pipeline.Step) error {
			if err := ExecStatements(ctx, tx, cp.Expand(step.SQL)); err != nil {
				return &stepFailure{err: err}
			}
			return nil
		}
		if j.Incremental != "" {
			r.res.Incremental = "full"
		}
	} else if parts := r.incremental(); parts != nil {
		done := r.opts.Progress.Start("model (" + j.Incremental + "s)")
		err := r.incrementalSteps(ctx, parts) // incremental.go
		done()
		if err != nil {
			return false, err
		}
		steps, keyTable = nil, incrementalRows
		r.res.Incremental = j.Incremental
		if parts.ByKey {
			r.res.Keys = parts.Count
		} else {
			r.res.Partitions = parts.Values
		}
	} else if j.Incremental != "" {
		r.res.Incremental = "full"
		if up, ok := r.p.input.(*source.Upstream); ok && up.Partitions != nil {
			r.res.IncrementalNote = up.Partitions.Fallback
		}
		if r.opts.FullRefresh {
			r.res.IncrementalNote = "--full-refresh"
		}
	}
	for i, step := range steps {
		done := r.opts.Progress.Start(strings.TrimSuffix(step.Name, ".sql"))
		err := exec(ctx, tx, step)
		done()
		var failed *stepFailure
		if errors.As(err, &failed) {
			return false, stepError(j, step, failed.err, r.p)
		} else if err != nil {
			return false, err
		}
		if i == 0 {
			// Quality rules tag staged rows after the stage step (rules.go).
			if err := applyRules(ctx, tx, j); err != nil {
				return false, err
			}
			if err := tagRejects(ctx, tx, j, r.rejects()); err != nil {
				return false, err
			}
			// The rows of an erased key or subject (erased.go).
			if err := guardErased(ctx, tx, j); err != nil {
				return false, err
			}
		}
		fault(r.opts, FaultAfterStep+step.Name)
	}
	if err := sealed.verify(ctx, tx); err != nil {
		return false, err
	}
	// A model's key names one row: no duplicate, no NULL.
	if err := checkModelKey(ctx, tx, j, keyTable); err != nil {
		return false, err
	}
	return true, nil
}

// partitions makes a partitioned job's run replace only its partitions
// (partitions.go) and reports which.
func (r *txRun) partitions(ctx context.Context) (bool, error) {
	if err := r.replacePartitions(ctx); err != nil {
		return false, err
	}
	if r.part != nil {
		r.res.Partitions, r.res.Repaired = r.part.declared, r.part.repaired
	}
	return true, nil
}

// balance checks that every input row has exactly one outcome, before
// commit. One pass gives both the counts and their total: over the stored
// outcome rows when the pipeline declares its outcomes table, else over the
// steps' outcomes relation (a table or a view).
func (r *txRun) balance(ctx context.Context) (bool, error) {
	j := r.j
	done := r.opts.Progress.Start("check outcomes")
	var staged int64
	if err := r.tx.QueryRowContext(ctx, `SELECT count(*) FROM staged`).Scan(&staged); err != nil {
		done()
		return false, fmt.Errorf("pipeline %s: count staged rows: %w", j.Pipeline.Name, contractError(j, "idem's outcome check", catalog.TrimSQLError(err)))
	}
	counts, where, err := outcomeCounts(ctx, r.tx, j, r.p.batchID)
	done()
	if err != nil {
		return false, fmt.Errorf("pipeline %s: %w", j.Pipeline.Name, contractError(j, "idem's outcome check", err))
	}
	var outcomes int64
	for _, n := range counts {
		outcomes += n
	}
	if staged != outcomes {
		return false, fmt.Errorf("pipeline %s: outcomes do not balance: %d rows staged, %d outcomes (%s); nothing committed", j.Pipeline.Name, staged, outcomes, where)
	}
	var files []string
	for _, f := range r.p.files {
		files = append(files, f.Path)
	}
	if err := refuseSeedConflicts(ctx, r.tx, j, files, counts); err != nil {
		return false, err
	}
	r.res.RowsIn = staged
	r.res.Outcomes = counts
	r.counts = counts
	return true, nil
}

// history scrubs erased rows from the retained inputs, drops the steps'
// temp tables, records the target's history as snapshot S and counts what
// the run wrote.
func (r *txRun) history(ctx context.Context) (bool, error) {
	j, tx, res := r.j, r.tx, r.res
	// The scrub reads this run's outcomes; only then are the step's temp
	// tables dropped, before history is written, to keep peak memory down.
	if err := r.d.scrubErased(ctx, tx, j, r.p, r.counts); err != nil {
		return false, err
	}
	tables, err := catalog.ReadRunTables(ctx, tx, j.Name)
	if err != nil {
		return false, err
	}
	// Keys idem deleted itself before the steps (replaceAll, a realigned
	// upstream) are changed keys too.
	if err := catalog.MergeReplaced(ctx, tx, tables); err != nil {
		return false, err
	}
	if err := dropScratch(ctx, tx); err != nil {
		return false, err
	}
	touched := int64(-1)
	if !r.opts.SkipHistory {
		cols, err := r.columns(ctx)
		if err != nil {
			return false, err
		}
		done := r.opts.Progress.Start("history")
		touched, err = catalog.RecordHistoryOf(ctx, tx, j, r.snapshot, cols, tables)
		done()
		if err != nil {
			return false, err
		}
	}
	res.RowsOut, err = catalog.CountRows(ctx, tx, j.Table)
	if err != nil {
		return false, err
	}
	if err := countWritten(ctx, tx, j, r.snapshot, touched, res); err != nil { // written.go
		return false, err
	}
	if r.part != nil {
		res.RowsWritten = r.part.written
	}
	if r.incr != nil {
		res.RowsWritten = r.incr.written
	}
	fault(r.opts, FaultAfterTarget)
	if r.opts.FailAfterTarget {
		return false, errors.New("injected failure after the target was written")
	}
	return true, nil
}

// commitRows sets the run's decision, snapshot and cursor and writes the
// rows that commit it (writeCommitRows).
func (r *txRun) commitRows(ctx context.Context) (bool, error) {
	res, p := r.res, r.p
	res.Snapshot = r.snapshot
	if r.j.Pipeline.Mode == pipeline.ModeApply {
		res.Decision = report.DecisionApplied
		if r.opts.To != nil {
			res.Cursor = *r.opts.To
		}
		if p.chunk != nil && p.chunk.To != nil {
			res.Cursor = *p.chunk.To
		}
	} else {
		res.Decision = report.DecisionLoaded
	}
	cols, err := r.columns(ctx)
	if err != nil {
		return false, err
	}
	if err := r.d.writeCommitRows(ctx, r.tx, r.j, p, r.st, res, r.opts, cols); err != nil {
		return false, err
	}
	return true, nil
}

// replaceAll empties the target and its tombstones before the steps of a
// job whose input is the whole table ([input] mode = "replace"): the
// pipeline then applies the file's rows as new, and a key the file no
// longer holds goes.
func replaceAll(ctx context.Context, tx *sql.Tx, j *job.Job, exists bool) error {
	if j.Input.Mode != job.InputModeReplace || !exists {
		return nil
	}
	keys := j.Pipeline.Key
	if len(keys) == 0 {
		keys = j.Key
	}
	if err := catalog.DeleteKeyedRows(ctx, tx, j.Table, keys, ""); err != nil {
		return fmt.Errorf("replace: %w", err)
	}
	return nil
}
