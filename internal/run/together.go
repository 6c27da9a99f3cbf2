package run

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"

	"github.com/idem-dev/idem/internal/job"
	"github.com/idem-dev/idem/internal/source"
)

// JobRun is one job of RunTogether and the options of its run.
type JobRun struct {
	Job  *job.Job
	Opts RunOptions
}

// RunTogether runs jobs, in order, in one transaction: each job's run sees
// what the runs before it wrote (a job reading one of them pins the
// snapshot it is about to commit), and either all of them commit or none
// does. A job that finds nothing to write (skipped, already committed)
// writes nothing and the others go on. Only jobs that read no stream and
// no files mode may run together; each one's BeforeCommit runs once its
// phases have, before the next job starts. Its fault points are passed to
// each job's hook: before_begin by the first, before_commit and after
// by the last, and the rest by the job that reaches them. It returns one
// result per job, or the first error, which rolls every job back.
func (d *DB) RunTogether(ctx context.Context, runs []JobRun) ([]*Result, error) {
	if d.readOnly {
		return nil, errors.New("database opened read-only")
	}
	if len(runs) == 0 {
		return nil, nil
	}
	preps := make([]*Prepared, len(runs))
	for i, r := range runs {
		p, err := Prepare(ctx, r.Job, r.Opts)
		if err != nil {
			return nil, d.logError(r.Job, r.Opts.BatchID, job.Canceled(ctx, err))
		}
		preps[i] = p
	}
	conn, err := d.sql.Conn(ctx)
	if err != nil {
		return nil, job.Canceled(ctx, fmt.Errorf("connect %s: %w", d.path, err))
	}
	defer conn.Close()
	first, last := runs[0].Opts, runs[len(runs)-1].Opts
	fault(first, FaultBeforeBegin)
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		return nil, job.Canceled(ctx, fmt.Errorf("begin: %w", err))
	}
	results := make([]*Result, len(runs))
	wrote := make([]bool, len(runs))
	fail := func(i int, err error) ([]*Result, error) {
		rbErr := tx.Rollback()
		for _, p := range preps {
			if p.retained {
				_, _ = source.Sweep(context.WithoutCancel(ctx), d.sql, d.path)
				break
			}
		}
		err = job.Canceled(ctx, err)
		decision := job.DecisionFailed
		if errors.Is(err, job.ErrRefused) {
			decision = job.DecisionRefused
		}
		d.logOutside(runs[i].Job, preps[i], decision, err.Error())
		if rbErr != nil && !errors.Is(rbErr, sql.ErrTxDone) {
			err = errors.Join(err, fmt.Errorf("rollback: %w", rbErr))
		}
		return nil, err
	}
	for i, r := range runs {
		opts := r.Opts
		opts.Progress = withQueryProgress(ctx, opts.Progress, conn)
		res, commit, err := d.runTx(ctx, tx, r.Job, preps[i], opts)
		if err == nil && commit && opts.BeforeCommit != nil {
			err = opts.BeforeCommit(ctx, tx, res)
		}
		if err != nil {
			return fail(i, err)
		}
		results[i], wrote[i] = res, commit
	}
	fault(last, FaultBeforeCommit)
	done := last.Progress.Start("commit")
	err = tx.Commit()
	done()
	if err != nil {
		return fail(len(runs)-1, fmt.Errorf("commit: %w", err))
	}
	fault(last, FaultAfterCommit)
	for i, r := range runs {
		if !wrote[i] {
			d.logNoCommit(r.Job, preps[i], results[i], r.Opts)
		}
		for _, path := range preps[i].scrubbed {
			_ = os.Remove(path)
		}
		d.expireAfter(ctx, r.Job, r.Opts, results[i])
	}
	fault(last, FaultCheckpoint)
	if !last.NoCheckpoint {
		done = last.Progress.Start("checkpoint")
		_, _ = conn.ExecContext(context.WithoutCancel(ctx), "CHECKPOINT")
		done()
	}
	fault(last, FaultAfterCheckpoint)
	replica := d.PublishReplica(ctx, last.Fault)
	for _, res := range results {
		res.Replica = replica
	}
	return results, nil
}
