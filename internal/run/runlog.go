package run

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/idem-dev/idem/internal/catalog"
	"github.com/idem-dev/idem/internal/job"
)

// Every invocation of a run that opened the job's database is recorded in
// idem.runs, whatever the job's input mode: a commit in its own transaction
// (writeCommitRows), anything else after the rollback, in a short
// transaction of its own (logNoCommit, logOutside, logInvocation). The log
// is best effort: a failure to record never changes what the run reports.

// logNoCommit records a run that decided to write nothing (skipped,
// already_committed) in the run log, in its own short transaction after the
// rollback. An already-committed batch is logged with what the run reported:
// the original batch's snapshot, rows in and outcome counts from the ledger.
// The last, empty chunk of a chunked run that applied chunks is not logged:
// the invocation is logged by its chunks.
func (d *DB) logNoCommit(j *job.Job, p *Prepared, res *Result, opts RunOptions) {
	var message string
	if c := p.chunk; c != nil {
		if c.After {
			return
		}
		if c.From != nil {
			message = fmt.Sprintf("nothing past watermark %d", *c.From)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	st, err := catalog.ReadState(ctx, d.sql, j.Name)
	if err != nil {
		return
	}
	var rowsIn, outcomes any
	snapshot := st.Snapshot
	if res.Decision == job.DecisionAlreadyCommitted {
		rowsIn, outcomes, snapshot = res.RowsIn, string(job.CanonicalJSON(res.Outcomes)), res.Snapshot
	}
	_ = catalog.InsertRun(ctx, d.sql, catalog.RunRow{Job: j.Name, BatchID: p.batchID, Decision: res.Decision,
		Changed: string(job.CanonicalJSON(job.NonNil(res.Changed))), RowsIn: rowsIn, Outcomes: outcomes,
		Snapshot: snapshot, Cursor: st.Cursor, Epoch: st.Epoch, Message: message})
}

// logInvocation records an invocation that never reached a run's
// transaction, or that a files-mode or chunked job decided outside one:
// "nothing new", a committed file that changed, an input that cannot be
// read. batchID may be empty.
func (d *DB) logInvocation(j *job.Job, batchID, decision, message string) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	st, err := catalog.ReadState(ctx, d.sql, j.Name)
	if err != nil {
		return
	}
	_ = catalog.InsertRun(ctx, d.sql, catalog.RunRow{Job: j.Name, BatchID: batchID, Decision: decision, Changed: "[]",
		Snapshot: st.Snapshot, Cursor: st.Cursor, Epoch: st.Epoch, Message: message})
}

// logError records err as a refused or failed invocation and returns it.
func (d *DB) logError(j *job.Job, batchID string, err error) error {
	if err != nil && !d.readOnly {
		d.logInvocation(j, batchID, errorDecision(err), err.Error())
	}
	return err
}

// errorDecision is the run log's decision for a run that ended with err.
func errorDecision(err error) string {
	if errors.Is(err, job.ErrRefused) {
		return job.DecisionRefused
	}
	return job.DecisionFailed
}
