package history

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"

	"github.com/idem-dev/idem/internal/catalog"
	"github.com/idem-dev/idem/internal/export"
	"github.com/idem-dev/idem/internal/job"
	"github.com/idem-dev/idem/internal/pipeline"
	"github.com/idem-dev/idem/internal/report"
	"github.com/idem-dev/idem/internal/run"
	"github.com/idem-dev/idem/internal/sqltext"
)

// RollbackResult reports a rollback.
type RollbackResult struct {
	Job      string `json:"job"`
	To       int64  `json:"to_snapshot"`
	Snapshot int64  `json:"snapshot"`
	Parent   int64  `json:"parent"`
	RowsOut  int64  `json:"rows_out"`
	// Replica reports the read replica published after the rollback
	// ([duckdb] read_replica).
	Replica *run.ReplicaInfo `json:"replica,omitempty"`
}

// RollbackOptions are the writer guards of a rollback, as for a run.
type RollbackOptions struct {
	ExpectParent *int64 // refuse unless the job's latest snapshot is this
	Epoch        *int64 // refuse unless this is the job's writer epoch
	// Fault is passed the run's fault points that apply to a rollback
	// (crash tests): before_begin, after_target, before_commit,
	// after_commit, checkpoint, after_checkpoint.
	Fault func(point string)
}

func (o RollbackOptions) fault(point string) {
	if o.Fault != nil {
		o.Fault(point)
	}
}

// Rollback makes the job's current rows equal to the pinned rows of snapshot
// to and commits them as a new snapshot (history, snapshot row, state row),
// in one transaction. The state row takes the job key and parts of that
// snapshot; the cursor, the ledger, the outcomes and an apply pipeline's
// tombstones stay as they are (the source has been read that far). A
// rollback that would bring back a key erased at or above the row's
// position is refused (exit 3, "rollback over an erasure"); so is one across
// a change of the target's columns.
func Rollback(ctx context.Context, d *run.DB, j *job.Job, to int64, opts RollbackOptions) (*RollbackResult, error) {
	opts.fault(run.FaultBeforeBegin)
	conn, tx, err := d.BeginPinned(ctx)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	defer func() { _ = tx.Rollback() }() // first: an open transaction holds conn, whose Close would wait for it (a panic)
	res, err := rollbackTx(ctx, d, tx, j, to, opts)
	if err != nil {
		return nil, errors.Join(err, ignoreDone(tx.Rollback()))
	}
	opts.fault(run.FaultBeforeCommit)
	if err := tx.Commit(); err != nil {
		return nil, fmt.Errorf("commit rollback: %w", err)
	}
	opts.fault(run.FaultAfterCommit)
	opts.fault(run.FaultCheckpoint)
	_, _ = conn.ExecContext(context.WithoutCancel(ctx), "CHECKPOINT")
	opts.fault(run.FaultAfterCheckpoint)
	res.Replica = d.PublishReplica(ctx, opts.Fault)
	return res, nil
}

func rollbackTx(ctx context.Context, d *run.DB, tx *sql.Tx, j *job.Job, to int64, opts RollbackOptions) (*RollbackResult, error) {
	st, err := catalog.ReadState(ctx, tx, j.Name)
	if err != nil {
		return nil, err
	}
	if to < 1 || to > st.Snapshot {
		return nil, report.Usage("job %s has no snapshot %d to roll back to (latest is %d)", j.Name, to, st.Snapshot)
	}
	// The writer guards of a run: a rollback prepared against snapshot P
	// must not discard a commit made since.
	if err := st.CheckEpoch(j, opts.Epoch); err != nil {
		return nil, err
	}
	if err := st.CheckParent(opts.ExpectParent); err != nil {
		return nil, err
	}
	// Another job's table first, then this job's own pipeline and target.
	if err := catalog.CheckOwners(ctx, tx, j, true); err != nil {
		return nil, err
	}
	if err := st.CheckIdentity(j); err != nil {
		return nil, err
	}
	if err := catalog.CheckNotExpired(ctx, tx, j.Name, to); err != nil {
		return nil, err
	}
	row, err := catalog.ReadSnapshot(ctx, tx, j.Name, to)
	if err != nil {
		return nil, err
	}
	// A target dropped by hand comes back from the schema DDL, then from
	// history like any rollback (a run refuses until then; see checkTarget).
	exists, err := catalog.TableExists(ctx, tx, "main", j.Table)
	if err != nil {
		return nil, err
	}
	if !exists {
		if err := recreateTarget(ctx, tx, j); err != nil {
			return nil, err
		}
	}
	cols, err := catalog.TargetColumns(ctx, tx, j.Table)
	if err != nil {
		return nil, err
	}
	if !slices.Equal(cols, row.Columns) {
		return nil, report.Refuse("rollback", "snapshot %d of %s has other columns than the target now (a schema change since): roll forward with a new batch instead", to, j.Name)
	}
	pinned, err := catalog.PinnedSelect(ctx, tx, j.Name, row.Columns, to)
	if err != nil {
		return nil, err
	}
	if n, err := catalog.ErasedIn(ctx, tx, j, pinned); err != nil {
		return nil, err
	} else if n > 0 {
		return nil, report.Refuse("erasure", "rollback over an erasure: snapshot %d of %s holds %d row(s) of erased keys; repair forward instead", to, j.Name, n)
	}
	names := make([]string, len(cols))
	for i, c := range cols {
		names[i] = c.Name
	}
	list := export.IdentList(names)
	target := sqltext.QuoteIdent(j.Table)
	for _, q := range []string{
		"CREATE OR REPLACE TEMP TABLE idem_rollback AS " + pinned,
		"DELETE FROM " + target,
		"INSERT INTO " + target + " (" + list + ") SELECT " + list + " FROM idem_rollback ORDER BY " + list,
		"DROP TABLE idem_rollback",
		"DROP TABLE IF EXISTS idem_touched",
	} {
		if _, err := tx.ExecContext(ctx, q); err != nil {
			return nil, fmt.Errorf("roll %s back to snapshot %d: %w", j.Name, to, catalog.TrimSQLError(err))
		}
	}
	snapshot := st.Snapshot + 1
	if _, err := catalog.RecordHistory(ctx, tx, j, snapshot); err != nil {
		return nil, err
	}
	opts.fault(run.FaultAfterTarget)
	inputs := catalog.SnapshotInputs{Files: []catalog.InputRef{}, RollbackTo: &to}
	if err := catalog.WriteSnapshotOnly(ctx, tx, j, st, snapshot, report.KindRollback, inputs, row.JobKey, row.PartsJSON); err != nil {
		return nil, err
	}
	if _, err := run.WriteCheckpoint(ctx, d, tx, j, snapshot, opts.Fault); err != nil {
		return nil, err
	}
	rows, err := catalog.CountRows(ctx, tx, j.Table)
	if err != nil {
		return nil, err
	}
	return &RollbackResult{Job: j.Name, To: to, Snapshot: snapshot, Parent: st.Snapshot, RowsOut: rows}, nil
}

// recreateTarget runs the job's schema DDL to bring back a missing target.
// The DDL may replace companion tables too (CREATE OR REPLACE of an outcomes
// table): their rows are kept and put back, so only the target is new.
func recreateTarget(ctx context.Context, tx *sql.Tx, j *job.Job) error {
	seen := map[string]bool{}
	var kept []string
	for _, m := range pipeline.Companion.FindAllStringSubmatch(j.DDL, -1) {
		name := j.Table + m[1]
		if seen[name] {
			continue
		}
		seen[name] = true
		ok, err := catalog.TableExists(ctx, tx, "main", name)
		if err != nil {
			return err
		}
		if !ok {
			continue
		}
		keep := fmt.Sprintf("idem_keep_%d", len(kept))
		if _, err := tx.ExecContext(ctx, "CREATE OR REPLACE TEMP TABLE "+keep+" AS SELECT * FROM "+sqltext.QuoteIdent(name)); err != nil {
			return fmt.Errorf("keep rows of %s: %w", name, catalog.TrimSQLError(err))
		}
		kept = append(kept, name)
	}
	if err := run.ExecStatements(ctx, tx, j.Expand(j.DDL)); err != nil {
		return fmt.Errorf("recreate %s from schema v%d of pipeline %s: %w", j.Table, j.SchemaVersion, j.Pipeline.Name, catalog.TrimSQLError(err))
	}
	for i, name := range kept {
		keep := fmt.Sprintf("idem_keep_%d", i)
		for _, q := range []string{
			"DELETE FROM " + sqltext.QuoteIdent(name),
			"INSERT INTO " + sqltext.QuoteIdent(name) + " BY NAME SELECT * FROM " + keep,
			"DROP TABLE " + keep,
		} {
			if _, err := tx.ExecContext(ctx, q); err != nil {
				return fmt.Errorf("put back rows of %s: %w", name, catalog.TrimSQLError(err))
			}
		}
	}
	return nil
}
