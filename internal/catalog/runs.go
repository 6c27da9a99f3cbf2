package catalog

import (
	"context"
	"fmt"
	"strings"
	"time"
)

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
	// Commit marks the row of a committing transaction: it is the
	// commit's entry in the commit log, with the next sequence number and
	// the database's id (commits.go).
	Commit bool
	// At is when the run decided, for a row written later than that (a
	// skipped run's, run.DB defers them); zero is the writing
	// transaction's current_timestamp.
	At time.Time
}

// InsertRun appends r to the run log.
func InsertRun(ctx context.Context, q Querier, r RunRow) error {
	if r.Commit {
		_, err := q.ExecContext(ctx, commitInsert, runArgs(r)...)
		return err
	}
	return InsertRuns(ctx, q, []RunRow{r})
}

// InsertRuns appends rows to the run log, in one statement when none is a
// commit's row: a project run logs a row for each job that wrote nothing.
func InsertRuns(ctx context.Context, q Querier, rows []RunRow) error {
	values := make([]string, 0, len(rows))
	args := make([]any, 0, 11*len(rows))
	for _, r := range rows {
		if r.Commit {
			for _, r := range rows {
				if err := InsertRun(ctx, q, r); err != nil {
					return err
				}
			}
			return nil
		}
		values = append(values, "(?, coalesce(CAST(? AS TIMESTAMP), current_timestamp), ?, ?, ?, ?, ?, ?, ?, ?, ?)")
		args = append(args, runArgs(r)...)
	}
	if len(values) == 0 {
		return nil
	}
	_, err := q.ExecContext(ctx, `INSERT INTO idem.runs (job, run_at, batch_id, decision, changed, rows_in, outcomes, snapshot, cursor, epoch, message) VALUES `+strings.Join(values, ", "), args...)
	return err
}

// runArgs are the values of r's row, in the order of the run log's
// columns (job, run_at, batch_id, ..., message).
func runArgs(r RunRow) []any {
	var at any
	if !r.At.IsZero() {
		at = r.At.UTC()
	}
	return []any{r.Job, at, nullable(r.BatchID), r.Decision, r.Changed, r.RowsIn, r.Outcomes, r.Snapshot, r.Cursor, r.Epoch, nullable(r.Message)}
}

// ScrubRunMessages replaces, in every job's run log, each message that
// holds one of values (the value an erasure removed) by a note naming
// the erasure that removed it: an erasure's own transaction calls it, so
// that no run log row keeps the subject (the run log keeps no row values
// since catalog version 6, but an older idem's messages quoted them).
// It returns how many messages it replaced.
func ScrubRunMessages(ctx context.Context, q Querier, j string, snapshot int64, values []string) (int64, error) {
	var n int64
	note := fmt.Sprintf("message removed by the erasure of snapshot %d of job %s: it named an erased value", snapshot, j)
	for _, v := range values {
		if v == "" {
			continue
		}
		res, err := q.ExecContext(ctx, `UPDATE idem.runs SET message = ? WHERE message IS NOT NULL AND contains(message, ?)`, note, v)
		if err != nil {
			return n, fmt.Errorf("scrub the run log: %w", err)
		}
		c, err := res.RowsAffected()
		if err != nil {
			return n, fmt.Errorf("scrub the run log: %w", err)
		}
		n += c
	}
	return n, nil
}
