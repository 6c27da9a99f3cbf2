package catalog

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/idem-dev/idem/internal/job"
	"github.com/idem-dev/idem/internal/jobkey"
	"github.com/idem-dev/idem/internal/report"
	"github.com/idem-dev/idem/internal/sqltext"
)

// State is the job's state row.
type State struct {
	Exists   bool
	Key      string
	Parts    jobkey.Parts
	HasParts bool
	Pipeline string
	Target   string
	Snapshot int64
	Cursor   int64
	Epoch    int64
}

// CheckIdentity refuses a job file whose job the database holds, committed,
// with another pipeline or another target table: two jobs of one name (two
// projects sharing a database, say) would otherwise merge, the second
// reloading over the first's table and history. A job keeps its pipeline
// and target for its life; a new name, or a database of its own, makes a
// new job.
func (st State) CheckIdentity(j *job.Job) error {
	if !st.Exists || st.Snapshot == 0 {
		return nil
	}
	if (st.Pipeline == "" || st.Pipeline == j.Pipeline.Name) && (st.Target == "" || strings.EqualFold(st.Target, j.Table)) {
		return nil
	}
	file := j.File
	if file == "" {
		file = "the job given"
	}
	return report.Refuse("identity", "job %s in this database is pipeline %s into table %s (snapshot %d), but %s is pipeline %s into table %s: two jobs share the name %s; nothing was changed. Give one of them another name, or its own database",
		j.Name, st.Pipeline, st.Target, st.Snapshot, file, j.Pipeline.Name, j.Table, j.Name)
}

// CheckEpoch refuses a writer whose epoch (when it gave one) is not the
// job's current writer epoch, and one that gave none when the job requires
// fencing.
func (st State) CheckEpoch(j *job.Job, epoch *int64) error {
	if epoch == nil && j.Fencing == job.FencingRequired {
		return report.Refuse("epoch", "job %s requires fencing ([job] fencing = \"required\"): pass --epoch %d, the job's current epoch (see idem fence)", j.Name, st.Epoch)
	}
	if epoch != nil && *epoch != st.Epoch {
		return report.Refuse("epoch", "stale writer: epoch %d is not the job's current epoch %d", *epoch, st.Epoch)
	}
	return nil
}

// CheckParent refuses a writer that prepared its work against another
// snapshot than the job's latest (when it named one).
func (st State) CheckParent(parent *int64) error {
	if parent != nil && *parent != st.Snapshot {
		return report.Refuse("parent", "stale parent: expected %d, latest is %d", *parent, st.Snapshot)
	}
	return nil
}

func ReadState(ctx context.Context, q Querier, j string) (State, error) {
	return readState(ctx, q, "idem.jobs", j)
}

// ReadStateIn reads job j's state row from the idem database attached as
// catalog cat (an environment reading production: see run.Attachment).
func ReadStateIn(ctx context.Context, q Querier, cat, j string) (State, error) {
	return readState(ctx, q, sqltext.QuoteIdent(cat)+".idem.jobs", j)
}

func readState(ctx context.Context, q Querier, table, j string) (State, error) {
	var r stateRow
	err := q.QueryRowContext(ctx, `SELECT `+stateColumns+` FROM `+table+` WHERE job = ?`, j).Scan(r.dest()...)
	if errors.Is(err, sql.ErrNoRows) {
		return State{Epoch: 1}, nil
	}
	if err != nil {
		return State{}, fmt.Errorf("read state of job %s: %w", j, err)
	}
	return r.state(j)
}

// ReadStates reads the state rows of jobs in one statement (a statement
// costs DuckDB 2.0 about 0.4 ms however small, and a mart reads several
// upstreams), keyed by job; a job without a row has ReadState's zero
// state.
func ReadStates(ctx context.Context, q Querier, jobs []string) (map[string]State, error) {
	out := make(map[string]State, len(jobs))
	for _, j := range jobs {
		out[j] = State{Epoch: 1}
	}
	if len(jobs) == 0 {
		return out, nil
	}
	rows, err := q.QueryContext(ctx,
		`SELECT job, `+stateColumns+` FROM idem.jobs WHERE list_contains(?::VARCHAR[], job)`, jobs)
	if err != nil {
		return nil, fmt.Errorf("read state of jobs %s: %w", strings.Join(jobs, ", "), err)
	}
	defer rows.Close()
	for rows.Next() {
		var j string
		var r stateRow
		if err := rows.Scan(append([]any{&j}, r.dest()...)...); err != nil {
			return nil, fmt.Errorf("read state of job %s: %w", j, err)
		}
		st, err := r.state(j)
		if err != nil {
			return nil, err
		}
		out[j] = st
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read state of jobs %s: %w", strings.Join(jobs, ", "), err)
	}
	return out, nil
}

// stateRow is a row of idem.jobs as read: stateColumns, scanned into
// dest.
type stateRow struct {
	key, parts, pipeline, target sql.NullString
	snapshot, cursor, epoch      int64
}

const stateColumns = "job_key, parts, pipeline, target, snapshot, cursor, epoch"

func (r *stateRow) dest() []any {
	return []any{&r.key, &r.parts, &r.pipeline, &r.target, &r.snapshot, &r.cursor, &r.epoch}
}

func (r stateRow) state(j string) (State, error) {
	st := State{Exists: true, Key: r.key.String, Pipeline: r.pipeline.String, Target: r.target.String,
		Snapshot: r.snapshot, Cursor: r.cursor, Epoch: r.epoch}
	if r.parts.Valid && r.parts.String != "" {
		p, err := jobkey.ParseParts(r.parts.String)
		if err != nil {
			return st, fmt.Errorf("read state of job %s: parts: %w", j, err)
		}
		st.Parts, st.HasParts = p, true
	}
	return st, nil
}

func (st State) PartsJSON() string {
	if !st.HasParts {
		return ""
	}
	return st.Parts.JSON()
}

// WriteState replaces the job's state row. An existing row is updated in
// place rather than deleted and inserted again: a deleted row makes the
// checkpoint after the commit vacuum idem.jobs, which cost about a tenth of
// a 10,000-record batch (docs/benchmarks.md).
func WriteState(ctx context.Context, q Querier, j *job.Job, key, parts string, snapshot, cursor, epoch int64) error {
	res, err := q.ExecContext(ctx, `UPDATE idem.jobs SET pipeline = ?, mode = ?, target = ?, job_key = ?, parts = ?, snapshot = ?, cursor = ?, epoch = ?, updated_at = current_timestamp WHERE job = ?`,
		j.Pipeline.Name, j.Pipeline.Mode, j.Table, key, parts, snapshot, cursor, epoch, j.Name)
	if err != nil {
		return fmt.Errorf("write state row: %w", err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return fmt.Errorf("write state row: %w", err)
	} else if n > 0 {
		return nil
	}
	if _, err := q.ExecContext(ctx, `INSERT INTO idem.jobs (job, pipeline, mode, target, job_key, parts, snapshot, cursor, epoch, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, current_timestamp)`,
		j.Name, j.Pipeline.Name, j.Pipeline.Mode, j.Table, key, parts, snapshot, cursor, epoch); err != nil {
		return fmt.Errorf("write state row: %w", err)
	}
	return nil
}

// AdvanceEpoch advances the job's writer epoch in tx, logs it and records
// the commit; it returns the new epoch. The caller commits.
func AdvanceEpoch(ctx context.Context, tx *sql.Tx, j string) (int64, error) {
	st, err := ReadState(ctx, tx, j)
	if err != nil {
		return 0, err
	}
	epoch := st.Epoch + 1
	if st.Exists {
		_, err = tx.ExecContext(ctx, `UPDATE idem.jobs SET epoch = ?, updated_at = current_timestamp WHERE job = ?`, epoch, j)
	} else {
		_, err = tx.ExecContext(ctx, `INSERT INTO idem.jobs (job, epoch, updated_at) VALUES (?, ?, current_timestamp)`, j, epoch)
	}
	if err == nil {
		err = InsertRun(ctx, tx, RunRow{Job: j, Decision: "fenced", Changed: "[]", Snapshot: st.Snapshot, Cursor: st.Cursor, Epoch: epoch, Commit: true})
	}
	if err != nil {
		return 0, fmt.Errorf("fence %s: %w", j, err)
	}
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

// ReadLog reads the job's runs, newest first (see DB.Log).
func ReadLog(ctx context.Context, q Querier, j string) ([]LogEntry, error) {
	rows, err := q.QueryContext(ctx, `SELECT run_at, batch_id, decision, changed, rows_in, outcomes, snapshot, cursor, epoch, message
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
		e.FirstLoad = e.Snapshot == 1 && (e.Decision == report.DecisionLoaded || e.Decision == report.DecisionApplied)
		e.Changed = []string{}
		if changed.Valid {
			if err := json.Unmarshal([]byte(changed.String), &e.Changed); err != nil {
				return nil, fmt.Errorf("read log of %s: changed %q: %w", j, changed.String, err)
			}
		}
		if outcomes.Valid {
			if err := json.Unmarshal([]byte(outcomes.String), &e.Outcomes); err != nil {
				return nil, fmt.Errorf("read log of %s: outcomes %q: %w", j, outcomes.String, err)
			}
		}
		out = append(out, e)
	}
	return out, rows.Err()
}
