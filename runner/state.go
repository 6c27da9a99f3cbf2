package runner

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Fence advances the job's writer epoch in its own transaction and returns
// the new epoch. A run given an older epoch is refused from then on.
func (d *DB) Fence(ctx context.Context, j string) (int64, error) {
	tx, err := d.sql.BeginTx(ctx, nil)
	if err != nil {
		return 0, fmt.Errorf("fence %s: %w", j, err)
	}
	st, err := readState(ctx, tx, j)
	if err != nil {
		return 0, errors.Join(err, tx.Rollback())
	}
	epoch := st.epoch + 1
	if st.exists {
		_, err = tx.ExecContext(ctx, `UPDATE idem.jobs SET epoch = ?, updated_at = current_timestamp WHERE job = ?`, epoch, j)
	} else {
		_, err = tx.ExecContext(ctx, `INSERT INTO idem.jobs (job, epoch, updated_at) VALUES (?, ?, current_timestamp)`, j, epoch)
	}
	if err == nil {
		_, err = tx.ExecContext(ctx, `INSERT INTO idem.runs VALUES (?, current_timestamp, NULL, 'fenced', '[]', NULL, NULL, ?, ?, ?, NULL)`, j, st.snapshot, st.cursor, epoch)
	}
	if err == nil {
		err = recordCommit(ctx, tx, j, "fenced")
	}
	if err != nil {
		return 0, errors.Join(fmt.Errorf("fence %s: %w", j, err), tx.Rollback())
	}
	if err := tx.Commit(); err != nil {
		return 0, fmt.Errorf("fence %s: %w", j, err)
	}
	_, _ = d.sql.ExecContext(ctx, "CHECKPOINT")
	return epoch, nil
}

// LogEntry is one run of a job as recorded in the run log.
type LogEntry struct {
	Time     time.Time        `json:"time"`
	BatchID  *string          `json:"batch_id"`
	Decision string           `json:"decision"`
	Changed  []string         `json:"changed"`
	RowsIn   *int64           `json:"rows_in"`
	Outcomes map[string]int64 `json:"outcomes"`
	Snapshot int64            `json:"snapshot"`
	Cursor   int64            `json:"cursor"`
	Epoch    int64            `json:"epoch"`
	Message  *string          `json:"message,omitempty"` // why a run wrote nothing, exactly as recorded

	// FirstLoad is true for the run that committed the job's first
	// snapshot.
	FirstLoad bool `json:"first_load"`
}

// Log returns the job's runs, newest first. The order is the order the rows
// were written in (idem.runs is append-only, and its rowid follows insertion
// order), not run_at: two runs can share a timestamp, and a wall clock can
// step back.
func (d *DB) Log(ctx context.Context, j string) ([]LogEntry, error) {
	rows, err := d.sql.QueryContext(ctx, `SELECT run_at, batch_id, decision, changed, rows_in, outcomes, snapshot, cursor, epoch, message
		FROM idem.runs WHERE job = ? ORDER BY rowid DESC`, j)
	if err != nil {
		return nil, fmt.Errorf("read log of %s: %w", j, err)
	}
	defer rows.Close()
	var out []LogEntry
	for rows.Next() {
		var e LogEntry
		var batch, changed, outcomes, msg sql.NullString
		var rowsIn, snap, cursor, epoch sql.NullInt64
		if err := rows.Scan(&e.Time, &batch, &e.Decision, &changed, &rowsIn, &outcomes, &snap, &cursor, &epoch, &msg); err != nil {
			return nil, err
		}
		if batch.Valid {
			e.BatchID = &batch.String
		}
		if rowsIn.Valid {
			e.RowsIn = &rowsIn.Int64
		}
		if msg.Valid {
			e.Message = &msg.String
		}
		e.Snapshot, e.Cursor, e.Epoch = snap.Int64, cursor.Int64, epoch.Int64
		e.FirstLoad = e.Snapshot == 1 && (e.Decision == DecisionLoaded || e.Decision == DecisionApplied)
		e.Changed = []string{}
		if changed.Valid {
			_ = json.Unmarshal([]byte(changed.String), &e.Changed)
		}
		if outcomes.Valid {
			_ = json.Unmarshal([]byte(outcomes.String), &e.Outcomes)
		}
		out = append(out, e)
	}
	return out, rows.Err()
}
