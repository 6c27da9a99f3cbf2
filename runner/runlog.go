package runner

import (
	"context"
	"time"
)

// logNoCommit records a run that decided to write nothing (skipped,
// already_committed) in the run log, in its own short transaction after the
// rollback. An already-committed batch is logged with what the run reported:
// the original batch's snapshot, rows in and outcome counts from the ledger.
func (d *DB) logNoCommit(job *Job, p *prepared, res *Result) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	st, err := readState(ctx, d.sql, job.Name)
	if err != nil {
		return
	}
	var rowsIn, outcomes any
	snapshot := st.snapshot
	if res.Decision == DecisionAlreadyCommitted {
		rowsIn, outcomes, snapshot = res.RowsIn, string(canonicalJSON(res.Outcomes)), res.Snapshot
	}
	_, _ = d.sql.ExecContext(ctx, `INSERT INTO idem.runs VALUES (?, current_timestamp, ?, ?, ?, ?, ?, ?, ?, ?, NULL)`,
		job.Name, nullable(p.batchID), res.Decision, string(canonicalJSON(nonNil(res.Changed))), rowsIn, outcomes, snapshot, st.cursor, st.epoch)
}
