package run

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/idem-dev/idem/internal/job"
	"github.com/idem-dev/idem/internal/report"
	"github.com/idem-dev/idem/internal/source"
)

// JobRun is one job of RunTogether and the options of its run.
type JobRun struct {
	Job  *job.Job
	Opts RunOptions
}

// writes says a run's result is one to commit: not skipped, not already
// committed.
func writes(res *Result) bool {
	return res.Decision != report.DecisionSkipped && res.Decision != report.DecisionAlreadyCommitted
}

// RunTogether runs jobs, in order, in one transaction on one pinned
// connection (Run is RunTogether of one job): each job's run sees what the
// runs before it wrote (a job reading one of them pins the snapshot it is
// about to commit), and either all of them commit or none does. A job that
// finds nothing to write (skipped, already committed) writes nothing and
// the others go on; when none writes, the transaction rolls back. Each
// job's BeforeCommit runs once its phases have, before the next job
// starts. Fault points go to each job's hook: before_begin by the first,
// before_commit and after by the last, the rest by the job that reaches
// them. It returns one result per job, or the first error, which rolls
// every job back.
func (d *DB) RunTogether(ctx context.Context, runs []JobRun) ([]*Result, error) {
	if d.readOnly {
		return nil, errors.New("database opened read-only")
	}
	if len(runs) == 0 {
		return nil, nil
	}
	preps := make([]*Prepared, len(runs))
	for i, r := range runs {
		var donePrep func()
		if r.Opts.Progress.Timings {
			donePrep = r.Opts.Progress.Start("prepare")
		}
		p, err := Prepare(ctx, r.Job, r.Opts)
		if donePrep != nil {
			donePrep()
		}
		if err != nil {
			return nil, d.logError(r.Job, r.Opts.BatchID, report.Canceled(ctx, err))
		}
		preps[i] = p
	}
	// One writing transaction of a handle at a time (the gate). When
	// another holds it (the jobs of a project run at once), the runs
	// first decide in a transaction of their own that writes nothing: when
	// none would write (skipped, already committed) that is their answer,
	// and only the run log waits for the gate. Runs of files found pending
	// (RunFiles) write unless a guard refuses, which the decision under the
	// gate reports as well: they wait without that first decision (a
	// connection and about a dozen statements, 7-10 ms of CPU each in the
	// project case, whose sources apply 36 files while another job writes).
	switch {
	case d.gate.TryLock():
	case allPending(runs):
		d.gate.Lock()
	default:
		results, decided, done := d.decideOnly(ctx, runs, preps)
		d.gate.Lock()
		if done {
			defer d.gate.Unlock()
			return results, d.finishNoCommit(ctx, runs, decided, results)
		}
	}
	defer d.gate.Unlock()
	conn, err := d.sql.Conn(ctx)
	if err != nil {
		return nil, report.Canceled(ctx, fmt.Errorf("connect %s: %w", d.path, err))
	}
	defer conn.Close()
	for i := range runs {
		runs[i].Opts.Progress = withQueryProgress(ctx, runs[i].Opts.Progress, conn)
	}
	first, last := runs[0].Opts, runs[len(runs)-1].Opts
	fault(first, FaultBeforeBegin)
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		return nil, report.Canceled(ctx, fmt.Errorf("begin: %w", err))
	}
	// A transaction still open holds its connection: conn.Close, deferred
	// above, would wait for it forever when a panic unwinds past here.
	// After Commit or Rollback this does nothing.
	defer func() { _ = tx.Rollback() }()
	// sweep removes the copies the runs pick retained, which no committed
	// row names.
	sweep := func(pick func(i int) bool) {
		for i, p := range preps {
			if p.retained && pick(i) {
				_, _ = source.Sweep(context.WithoutCancel(ctx), d.sql, d.path)
				return
			}
		}
	}
	results := make([]*Result, len(runs))
	anyWrites := false
	learn := &guardLearn{} // kept once the transaction commits
	for i, r := range runs {
		res, commit, err := d.runTx(ctx, tx, r.Job, preps[i], r.Opts, learn)
		if err == nil && commit && r.Opts.BeforeCommit != nil {
			err = r.Opts.BeforeCommit(ctx, tx, res)
		}
		if err != nil {
			rbErr := tx.Rollback()
			sweep(func(int) bool { return true })
			err = report.Canceled(ctx, err)
			decision := report.DecisionFailed
			if errors.Is(err, report.ErrRefused) {
				decision = report.DecisionRefused
			}
			if lerr := d.logOutside(r.Job, preps[i], decision, err); lerr != nil {
				err = errors.Join(err, lerr)
			}
			if rbErr != nil && !errors.Is(rbErr, sql.ErrTxDone) {
				err = errors.Join(err, fmt.Errorf("rollback: %w", rbErr))
			}
			return nil, err
		}
		results[i] = res
		anyWrites = anyWrites || writes(res)
	}
	logNoCommit := func() error { return d.finishNoCommit(ctx, runs, preps, results) }
	if !anyWrites {
		_ = tx.Rollback()
		sweep(func(int) bool { return true })
		if err := logNoCommit(); err != nil {
			return nil, err
		}
		return results, nil
	}
	// The verdicts learned, kept with the commit (verdicts.go).
	verdicts, err := d.guards.save(ctx, tx, d.path, learn)
	if err != nil {
		return nil, err
	}
	fault(last, FaultBeforeCommit)
	done := last.Progress.Start("commit")
	err = tx.Commit()
	done()
	if err != nil {
		err = report.Canceled(ctx, fmt.Errorf("commit: %w", err))
		for i, r := range runs {
			if lerr := d.logOutside(r.Job, preps[i], report.DecisionFailed, err); lerr != nil {
				err = errors.Join(err, lerr)
			}
		}
		return nil, err
	}
	fault(last, FaultAfterCommit)
	learn.keep(d.guards)
	d.guards.stored(verdicts)
	d.deferred.committed(tx)
	sweep(func(i int) bool { return !writes(results[i]) })
	logErr := logNoCommit()
	for i, r := range runs {
		if !writes(results[i]) {
			continue
		}
		for _, path := range preps[i].scrubbed {
			_ = os.Remove(path)
		}
		d.expireAfter(ctx, r.Job, r.Opts, results[i])
	}
	// The commit is durable in the WAL; it is checkpointed into the file
	// when that pays or is needed (settle.go). A failure here does not
	// undo the commit.
	fault(last, FaultCheckpoint)
	if d.unsettled == 0 {
		d.since = time.Now()
	}
	d.unsettled++
	if d.checkpointNow(context.WithoutCancel(ctx), conn) {
		done = last.Progress.Start("checkpoint")
		if _, err := conn.ExecContext(context.WithoutCancel(ctx), "CHECKPOINT"); err == nil {
			d.settled(context.WithoutCancel(ctx), conn)
		}
		done()
	}
	fault(last, FaultAfterCheckpoint)
	replica := d.PublishReplica(ctx, last.Fault) // replica.go
	for _, res := range results {
		res.Replica = replica
	}
	if logErr != nil {
		return nil, fmt.Errorf("the batch committed, but %w", logErr)
	}
	return results, nil
}

// finishNoCommit records each run that wrote nothing in the run log; the
// expiry after it finishes one a kill cut short.
func (d *DB) finishNoCommit(ctx context.Context, runs []JobRun, preps []*Prepared, results []*Result) error {
	var errs []error
	for i, r := range runs {
		if !writes(results[i]) {
			errs = append(errs, d.logNoCommit(r.Job, preps[i], results[i], r.Opts))
			d.expireAfter(ctx, r.Job, r.Opts, results[i])
		}
	}
	return errors.Join(errs...)
}

// decideOnly runs the guards of runs, in order, in one transaction that
// writes nothing and rolls back (decide up to what a run with nothing to
// write answers). done is true, with every run's result, when none of them
// would write; otherwise, or on any error, the runs are to be run as
// usual, which decides again and reports the error. It decides on copies
// of preps (pinning changes a Prepared and its upstream input), returned
// as decided.
func (d *DB) decideOnly(ctx context.Context, runs []JobRun, preps []*Prepared) (results []*Result, decided []*Prepared, done bool) {
	tx, err := d.sql.BeginTx(ctx, nil)
	if err != nil {
		return nil, nil, false
	}
	defer func() { _ = tx.Rollback() }()
	results = make([]*Result, len(runs))
	decided = make([]*Prepared, len(runs))
	for i, r := range runs {
		p := *preps[i]
		if up, ok := p.input.(*source.Upstream); ok {
			cp := *up
			p.input = &cp
		}
		res, _, _, nothing, err := d.decide(ctx, tx, r.Job, &p, r.Opts, false, true, nil)
		if err != nil || !nothing || res == nil {
			return nil, nil, false
		}
		results[i], decided[i] = res, &p
	}
	return results, decided, true
}

// allPending reports whether every run is the batch of a file RunFiles
// found not committed.
func allPending(runs []JobRun) bool {
	for _, r := range runs {
		if !r.Opts.pending {
			return false
		}
	}
	return true
}
