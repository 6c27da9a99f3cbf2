package catalog

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/idem-dev/idem/internal/jobkey"
	"github.com/idem-dev/idem/internal/pipeline"
	"github.com/idem-dev/idem/internal/report"
	"github.com/idem-dev/idem/internal/sqltext"
)

// Retention is a job's row of idem.retention: what expiry has removed so
// far. Snapshots below OldestKept are expired (their snapshot rows, ledger
// rows and run log stay; their history, outcomes and packets are gone);
// InputsFrom is the first snapshot whose retained inputs are still kept for
// reruns. A job never expired has OldestKept 1 and InputsFrom 1.
type Retention struct {
	OldestKept int64
	InputsFrom int64
}

// ReadRetention reads job j's retention row. A database from before
// idem.retention (opened read-only, so not migrated) has expired
// nothing.
func ReadRetention(ctx context.Context, q Querier, j string) (Retention, error) {
	r := Retention{OldestKept: 1, InputsFrom: 1}
	exists, err := TableExists(ctx, q, "idem", "retention")
	if err != nil || !exists {
		return r, err
	}
	err = q.QueryRowContext(ctx, `SELECT oldest_kept, inputs_from FROM idem.retention WHERE job = ?`, j).Scan(&r.OldestKept, &r.InputsFrom)
	if errors.Is(err, sql.ErrNoRows) {
		return Retention{OldestKept: 1, InputsFrom: 1}, nil
	}
	if err != nil {
		return r, fmt.Errorf("read retention of %s: %w", j, err)
	}
	return r, nil
}

// WriteRetention records, in the expiry's transaction, what expiry of job
// j has removed.
func WriteRetention(ctx context.Context, tx *sql.Tx, j string, r Retention) error {
	if _, err := tx.ExecContext(ctx, `DELETE FROM idem.retention WHERE job = ?`, j); err != nil {
		return fmt.Errorf("record retention of %s: %w", j, err)
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO idem.retention (job, oldest_kept, inputs_from, expired_at) VALUES (?, ?, ?, current_timestamp)`, j, r.OldestKept, r.InputsFrom); err != nil {
		return fmt.Errorf("record retention of %s: %w", j, err)
	}
	return nil
}

// ExpiredError is the refusal of a read of an expired snapshot (exit 3).
func ExpiredError(j string, snapshot, oldestKept int64) error {
	return report.Refuse("expired", "snapshot %d of %s expired (oldest kept: %d)", snapshot, j, oldestKept)
}

// CheckNotExpired refuses (exit 3, ExpiredError) a read of snapshot S of
// job j when S has expired: its history rows are no longer whole, so it
// has no honest rows to serve.
func CheckNotExpired(ctx context.Context, q Querier, j string, snapshot int64) error {
	r, err := ReadRetention(ctx, q, j)
	if err != nil {
		return err
	}
	if snapshot < r.OldestKept {
		return ExpiredError(j, snapshot, r.OldestKept)
	}
	return nil
}

// DownstreamPins are the snapshots of job j that apply jobs reading its
// changes pinned in their state rows, by downstream job: their next
// incremental read starts there (ChangesSelect from that snapshot), so
// expiry of j keeps it.
func DownstreamPins(ctx context.Context, q Querier, j string) (map[string]int64, error) {
	rows, err := q.QueryContext(ctx, `SELECT job, parts FROM idem.jobs WHERE mode = ? AND parts IS NOT NULL AND contains(parts, ?) ORDER BY job`, pipeline.ModeApply, j)
	if err != nil {
		return nil, fmt.Errorf("read the jobs downstream of %s: %w", j, err)
	}
	defer rows.Close()
	out := map[string]int64{}
	for rows.Next() {
		var name, parts string
		if err := rows.Scan(&name, &parts); err != nil {
			return nil, err
		}
		p, err := jobkey.ParseParts(parts)
		if err != nil {
			return nil, fmt.Errorf("read state of job %s: parts: %w", name, err)
		}
		for _, r := range p.Upstream {
			if r.Job == j {
				out[name] = r.Snapshot
			}
		}
	}
	return out, rows.Err()
}

// Reader is a job that read another job: its mode and latest snapshot.
type Reader struct {
	Job      string
	Mode     string
	Snapshot int64
}

// Readers are the jobs other than upstream whose snapshot rows name
// upstream in their key parts (a job that reads it now, or did in a
// snapshot it may still keep), by name. The match on the parts' text may
// name a job that never read upstream: the caller checks each snapshot's
// parts.
func Readers(ctx context.Context, q Querier, upstream string) ([]Reader, error) {
	rows, err := q.QueryContext(ctx, `SELECT j.job, coalesce(j.mode, ''), j.snapshot FROM idem.jobs AS j
		WHERE j.job <> ? AND EXISTS (SELECT 1 FROM idem.snapshots AS s WHERE s.job = j.job AND contains(s.parts, ?))
		ORDER BY j.job`, upstream, `"job":`+string(jobkey.CanonicalJSON(upstream)))
	if err != nil {
		return nil, fmt.Errorf("read the jobs downstream of %s: %w", upstream, err)
	}
	defer rows.Close()
	var out []Reader
	for rows.Next() {
		var r Reader
		if err := rows.Scan(&r.Job, &r.Mode, &r.Snapshot); err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// outcomesWithBatch says the job's outcomes table exists and has a
// batch_id column, so that its rows can be told apart by batch.
func outcomesWithBatch(ctx context.Context, q Querier, table string) (bool, error) {
	if table == "" {
		return false, nil
	}
	cols, err := TargetColumns(ctx, q, table)
	if err != nil {
		return false, err
	}
	for _, c := range cols {
		if c.Name == "batch_id" {
			return true, nil
		}
	}
	return false, nil
}

// ExpireOutcomes deletes from the job's outcomes table (when it exists and
// has a batch_id column) the rows of the batches the ledger records below
// snapshot oldestKept. The ledger rows stay: an expired batch id is still
// already_committed.
func ExpireOutcomes(ctx context.Context, tx *sql.Tx, j, table string, oldestKept int64) error {
	ok, err := outcomesWithBatch(ctx, tx, table)
	if err != nil || !ok {
		return err
	}
	if _, err := tx.ExecContext(ctx, "DELETE FROM "+sqltext.QuoteIdent(table)+" WHERE batch_id IN (SELECT batch_id FROM idem.ledger WHERE job = ? AND snapshot < ?)", j, oldestKept); err != nil {
		return fmt.Errorf("expire outcomes of %s: %w", j, TrimSQLError(err))
	}
	return nil
}

// OutcomeRowsBySnapshot counts the rows of the job's outcomes table by the
// snapshot that committed their batch (none for a table without batch_id).
func OutcomeRowsBySnapshot(ctx context.Context, q Querier, j, table string) (map[int64]int64, error) {
	out := map[int64]int64{}
	ok, err := outcomesWithBatch(ctx, q, table)
	if err != nil || !ok {
		return out, err
	}
	rows, err := q.QueryContext(ctx, "SELECT l.snapshot, count(*) FROM "+sqltext.QuoteIdent(table)+" AS o JOIN idem.ledger AS l ON l.job = ? AND l.batch_id = o.batch_id GROUP BY l.snapshot", j)
	if err != nil {
		return nil, fmt.Errorf("count outcomes of %s: %w", j, TrimSQLError(err))
	}
	defer rows.Close()
	for rows.Next() {
		var s, n int64
		if err := rows.Scan(&s, &n); err != nil {
			return nil, err
		}
		out[s] = n
	}
	return out, rows.Err()
}

// ExpirePackets removes the release packets of job j's snapshots below
// oldestKept: they describe rows no longer served. The ledger keeps each
// batch's digest, bounds and counts.
func ExpirePackets(ctx context.Context, tx *sql.Tx, j string, oldestKept int64) (int64, error) {
	r, err := tx.ExecContext(ctx, `UPDATE idem.snapshots SET packet = NULL WHERE job = ? AND snapshot < ? AND packet IS NOT NULL`, j, oldestKept)
	if err != nil {
		return 0, fmt.Errorf("expire packets of %s: %w", j, err)
	}
	n, _ := r.RowsAffected()
	return n, nil
}

// CountPackets counts the release packets of job j below snapshot
// oldestKept.
func CountPackets(ctx context.Context, q Querier, j string, oldestKept int64) (int64, error) {
	var n int64
	err := q.QueryRowContext(ctx, `SELECT count(*) FROM idem.packets WHERE job = ? AND snapshot < ?`, j, oldestKept).Scan(&n)
	return n, err
}

// InputsNamedElsewhere is the set of retained inputs that a snapshot of
// another job than j names at or above that job's own InputsFrom (every
// snapshot of a job never expired): content-addressed files are shared,
// and those stay for that job's reruns.
func InputsNamedElsewhere(ctx context.Context, q Querier, j string) (map[string]bool, error) {
	rows, err := q.QueryContext(ctx, `SELECT s.inputs FROM idem.snapshots AS s LEFT JOIN idem.retention AS r ON r.job = s.job
		WHERE s.job <> ? AND s.inputs IS NOT NULL AND s.snapshot >= coalesce(r.inputs_from, 0)`, j)
	if err != nil {
		return nil, fmt.Errorf("read the inputs other jobs keep: %w", err)
	}
	defer rows.Close()
	out := map[string]bool{}
	for rows.Next() {
		var text string
		if err := rows.Scan(&text); err != nil {
			return nil, err
		}
		var in SnapshotInputs
		if err := json.Unmarshal([]byte(text), &in); err != nil {
			return nil, fmt.Errorf("read the inputs other jobs keep: %w", err)
		}
		for _, f := range in.Files {
			out[f.SHA256] = true
		}
	}
	return out, rows.Err()
}

// RetainedInputSizes is every recorded retained input with its size.
func RetainedInputSizes(ctx context.Context, q Querier) (map[string]int64, error) {
	rows, err := q.QueryContext(ctx, `SELECT sha256, max(bytes) FROM idem.inputs GROUP BY sha256`)
	if err != nil {
		return nil, fmt.Errorf("read retained inputs: %w", err)
	}
	defer rows.Close()
	out := map[string]int64{}
	for rows.Next() {
		var s string
		var n int64
		if err := rows.Scan(&s, &n); err != nil {
			return nil, err
		}
		out[s] = n
	}
	return out, rows.Err()
}

// ForgetInputs deletes the records of the retained inputs sums, in the
// expiry's transaction: the sweep after the commit deletes their files.
func ForgetInputs(ctx context.Context, tx *sql.Tx, sums []string) error {
	if len(sums) == 0 {
		return nil
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM idem.inputs WHERE sha256 IN (SELECT unnest(?::VARCHAR[]))`, sums); err != nil {
		return fmt.Errorf("forget expired inputs: %w", err)
	}
	return nil
}
