package catalog

import "context"

// RunRow is one row of the run log. Nil fields are NULL.
type RunRow struct {
	Job      string
	BatchID  string // "" is NULL
	Decision string
	Changed  string // JSON
	RowsIn   any
	Outcomes any // JSON
	Snapshot any
	Cursor   any
	Epoch    any
	Message  string // "" is NULL
}

// InsertRun appends r to the run log.
func InsertRun(ctx context.Context, q Querier, r RunRow) error {
	_, err := q.ExecContext(ctx, `INSERT INTO idem.runs VALUES (?, current_timestamp, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		r.Job, nullable(r.BatchID), r.Decision, r.Changed, r.RowsIn, r.Outcomes, r.Snapshot, r.Cursor, r.Epoch, nullable(r.Message))
	return err
}
