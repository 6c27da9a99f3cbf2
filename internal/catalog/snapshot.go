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

// SnapshotCounts reads the rows in and the outcomes JSON that snapshot S of
// job recorded; both are empty when there is no such row.
func SnapshotCounts(ctx context.Context, q Querier, j string, snapshot int64) (rowsIn int64, outcomes string, err error) {
	var o sql.NullString
	if err := q.QueryRowContext(ctx, `SELECT rows_in, outcomes FROM idem.snapshots WHERE job = ? AND snapshot = ?`,
		j, snapshot).Scan(&rowsIn, &o); err != nil && !errors.Is(err, sql.ErrNoRows) {
		return rowsIn, o.String, fmt.Errorf("read snapshot %d of job %s: %w", snapshot, j, err)
	}
	return rowsIn, o.String, nil
}

// SnapshotRowsOut reads the target row count snapshot S of job recorded;
// not valid when there is no such row or it recorded none.
func SnapshotRowsOut(ctx context.Context, q Querier, j string, snapshot int64) (sql.NullInt64, error) {
	var want sql.NullInt64
	err := q.QueryRowContext(ctx, `SELECT rows_out FROM idem.snapshots WHERE job = ? AND snapshot = ?`, j, snapshot).Scan(&want)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return want, fmt.Errorf("read snapshot %d of job %s: %w", snapshot, j, err)
	}
	return want, nil
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
