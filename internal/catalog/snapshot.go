package catalog

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/idem-dev/idem/internal/job"
	"github.com/idem-dev/idem/internal/jobkey"
	"github.com/idem-dev/idem/internal/report"
)

// SnapshotCountsRow is what snapshot S of a job recorded of its rows: the
// rows in, the outcomes JSON and the target's rows out. Zero (RowsOut not
// valid) when there is no such row.
type SnapshotCountsRow struct {
	RowsIn   int64
	Outcomes string
	RowsOut  sql.NullInt64
}

// ReadSnapshotCounts reads the counts snapshot S of job recorded, in one
// statement: a run's decision checks the target's rows against them and
// reports them when it skips.
func ReadSnapshotCounts(ctx context.Context, q Querier, j string, snapshot int64) (SnapshotCountsRow, error) {
	var c SnapshotCountsRow
	var in sql.NullInt64
	var o sql.NullString
	err := q.QueryRowContext(ctx, `SELECT rows_in, outcomes, rows_out FROM idem.snapshots WHERE job = ? AND snapshot = ?`,
		j, snapshot).Scan(&in, &o, &c.RowsOut)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return SnapshotCountsRow{}, fmt.Errorf("read snapshot %d of job %s: %w", snapshot, j, err)
	}
	c.RowsIn, c.Outcomes = in.Int64, o.String
	return c, nil
}

// SetSnapshotInputs replaces the inputs JSON of snapshot S of job.
func SetSnapshotInputs(ctx context.Context, q Querier, j string, snapshot int64, inputs SnapshotInputs) error {
	_, err := q.ExecContext(ctx, `UPDATE idem.snapshots SET inputs = ? WHERE job = ? AND snapshot = ?`,
		string(jobkey.CanonicalJSON(inputs)), j, snapshot)
	return err
}

// NewSnapshot is a snapshot row a run writes.
type NewSnapshot struct {
	Job              string
	Snapshot, Parent int64
	Kind             string
	BatchID          string // "" is NULL
	JobKey, Parts    string
	Inputs           string // JSON
	RowsIn, RowsOut  int64
	Outcomes         string // JSON
	Columns          string // JSON
	KeyColumns       string // JSON
	Packet           string // JSON (EncodePacket); "" is none
}

// InsertSnapshot writes the snapshot row s.
func InsertSnapshot(ctx context.Context, q Querier, s NewSnapshot) error {
	if _, err := q.ExecContext(ctx, `INSERT INTO idem.snapshots (job, snapshot, parent, kind, batch_id, job_key, parts, inputs, rows_in, rows_out, outcomes, columns, key_columns, packet, committed_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, current_timestamp)`,
		s.Job, s.Snapshot, s.Parent, s.Kind, nullable(s.BatchID), s.JobKey, s.Parts, s.Inputs,
		s.RowsIn, s.RowsOut, s.Outcomes, s.Columns, s.KeyColumns, nullable(s.Packet)); err != nil {
		return fmt.Errorf("write snapshot row: %w", err)
	}
	return nil
}

// WriteSnapshotOnly commits a snapshot that no batch made (an erasure or a
// rollback): its snapshot row, the state row's new snapshot (and, when given,
// job key and parts) and the run log row.
func WriteSnapshotOnly(ctx context.Context, tx *sql.Tx, j *job.Job, st State, snapshot int64, kind string, inputs SnapshotInputs, key, parts string) error {
	cols, err := TargetColumns(ctx, tx, j.Table)
	if err != nil {
		return err
	}
	rowsOut, err := CountRows(ctx, tx, j.Table)
	if err != nil {
		return err
	}
	if inputs.Files == nil {
		inputs.Files = []InputRef{}
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO idem.snapshots (job, snapshot, parent, kind, batch_id, job_key, parts, inputs, rows_in, rows_out, outcomes, columns, key_columns, committed_at) VALUES (?, ?, ?, ?, NULL, ?, ?, ?, 0, ?, '{}', ?, ?, current_timestamp)`,
		j.Name, snapshot, st.Snapshot, kind, nullable(key), nullable(parts), string(jobkey.CanonicalJSON(inputs)),
		rowsOut, string(jobkey.CanonicalJSON(cols)), string(jobkey.CanonicalJSON(report.NonNil(j.Pipeline.Key)))); err != nil {
		return fmt.Errorf("write snapshot row: %w", err)
	}
	if _, err := tx.ExecContext(ctx, `UPDATE idem.jobs SET snapshot = ?, job_key = ?, parts = ?, updated_at = current_timestamp WHERE job = ?`,
		snapshot, nullable(key), nullable(parts), j.Name); err != nil {
		return fmt.Errorf("write state row: %w", err)
	}
	decision := map[string]string{report.KindErase: "erased", report.KindRollback: "rolled_back", report.KindFullRefresh: report.KindFullRefresh}[kind]
	if err := InsertRun(ctx, tx, RunRow{Job: j.Name, Decision: decision, Changed: "[]", RowsIn: 0, Outcomes: "{}",
		Snapshot: snapshot, Cursor: st.Cursor, Epoch: st.Epoch, Commit: true}); err != nil {
		return fmt.Errorf("write run log: %w", err)
	}
	return nil
}
