package ops

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"

	"github.com/idem-dev/idem/internal/catalog"
	"github.com/idem-dev/idem/internal/job"
	"github.com/idem-dev/idem/internal/run"
	"github.com/idem-dev/idem/internal/source"
)

// EraseOptions name the subject to erase.
type EraseOptions struct {
	Key string
	// Position overrides the erasure point (the highest position seen for
	// the key). A pinned re-run uses it to replay a recorded erasure.
	Position *int64
	// Replay commits the erasure even where the key is found nowhere (a
	// pinned re-run replays it over inputs already rewritten without it).
	// A replay is not a writer of the job and is never fenced.
	Replay bool
	// ExpectParent and Epoch are the writer guards of a run (exit 3).
	ExpectParent *int64
	Epoch        *int64
	// Fault is called at the fault points an erasure passes (after_target:
	// rows deleted and inputs rewritten; before_commit; after_commit, before
	// the replaced files are deleted; checkpoint; after_checkpoint), as
	// RunOptions.Fault is for a run.
	Fault func(point string)
}

// EraseResult reports an erasure. It never holds the subject's payload.
type EraseResult struct {
	Job      string `json:"job"`
	Key      string `json:"key"`
	Snapshot int64  `json:"snapshot"`
	Parent   int64  `json:"parent"`
	// Position is the erasure point: a later batch carrying the key at or
	// below it gets outcome erased.
	Position *int64 `json:"position"`
	// Removed counts the rows removed per table; history counts every
	// snapshot's version of the rows.
	Removed map[string]int64        `json:"removed"`
	Inputs  []source.RewrittenInput `json:"inputs"`
	// AlreadyErased says the key was erased before and found nowhere:
	// nothing was committed and Snapshot is the latest.
	AlreadyErased bool `json:"already_erased"`
	// Replica reports the read replica published after the erasure
	// ([duckdb] read_replica).
	Replica *run.ReplicaInfo `json:"replica,omitempty"`
}

// companionTables are the tables the job's schema DDL creates beside the
// target ({{table:_suffix}}) that exist and hold the key column.
func companionTables(ctx context.Context, q catalog.Querier, j *job.Job, keyCol string) ([]string, error) {
	seen := map[string]bool{}
	var out []string
	for _, m := range job.Companion.FindAllStringSubmatch(j.DDL, -1) {
		name := j.Table + m[1]
		if seen[name] {
			continue
		}
		seen[name] = true
		exists, err := catalog.TableExists(ctx, q, "main", name)
		if err != nil {
			return nil, err
		}
		if !exists {
			continue // a view, or not created
		}
		cols, err := catalog.TargetColumns(ctx, q, name)
		if err != nil {
			return nil, err
		}
		for _, c := range cols {
			if c.Name == keyCol {
				out = append(out, name)
				break
			}
		}
	}
	return out, nil
}

// Erase removes one subject (a value of the job's key column) in ONE
// transaction: from the current rows, from every snapshot's history, from
// the companion tables (<target>_outcomes, tombstones) and from the retained
// inputs, which are rewritten without the subject's rows and stored under
// their new sha256. It records the erasure (job, key, the highest position
// seen for the key, snapshot, time: never the payload) so that a later batch
// carrying the key at or below that position gets outcome erased, and
// commits it as a new snapshot. Replaced input files are deleted after the
// commit when no snapshot refers to them; a kill before that leaves them to
// the next open of the database, which deletes every retained file no
// committed row names (sweepInputs). A key found nowhere is an error
// and nothing is committed, unless it was erased before: then the result
// says AlreadyErased and nothing changes.
func Erase(ctx context.Context, d *run.DB, j *job.Job, opts EraseOptions) (*EraseResult, error) {
	if len(j.Pipeline.Key) != 1 {
		return nil, job.Usage("erase needs a pipeline with one key column; %s has %d", j.Pipeline.Name, len(j.Pipeline.Key))
	}
	if j.Pipeline.Position == "" {
		return nil, job.Usage("erase needs a pipeline that declares its position column (the source order): without one, an erasure could not stop a replay of an old batch; %s declares none", j.Pipeline.Name)
	}
	if opts.Key == "" {
		return nil, job.Usage("erase needs --key K")
	}
	conn, tx, err := d.BeginPinned(ctx)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	fault := func(point string) {
		if opts.Fault != nil {
			opts.Fault(point)
		}
	}
	res, stale, err := eraseTx(ctx, d, tx, j, opts)
	if err == nil && !res.AlreadyErased {
		fault(run.FaultAfterTarget)
	}
	if err != nil || res.AlreadyErased {
		rbErr := ignoreDone(tx.Rollback())
		// Files rewritten for an erasure that did not commit are named by
		// no committed row.
		_, _ = source.Sweep(context.WithoutCancel(ctx), d.SQL(), d.Path())
		if err != nil {
			return nil, errors.Join(err, rbErr)
		}
		return res, rbErr
	}
	// A replica holding the subject goes before the erasure commits: a
	// kill from here until the new one is published leaves none, which the
	// next writable open publishes.
	if err := d.WithdrawReplica(); err != nil {
		return nil, errors.Join(err, ignoreDone(tx.Rollback()))
	}
	// So do the rows kept by reruns that did not reproduce (they are
	// diagnostics, rebuilt by the next such rerun).
	if err := removeRerunKept(d.Path(), j.Name); err != nil {
		return nil, errors.Join(fmt.Errorf("erase: remove the rows kept by reruns: %w", err), ignoreDone(tx.Rollback()))
	}
	fault(run.FaultBeforeCommit)
	if err := tx.Commit(); err != nil {
		_, _ = source.Sweep(context.WithoutCancel(ctx), d.SQL(), d.Path())
		return nil, fmt.Errorf("commit erasure: %w", err)
	}
	fault(run.FaultAfterCommit)
	// The old files held the subject; they go once nothing refers to them.
	// One that cannot be deleted now is deleted by the next open for
	// writing: the erasure is committed either way.
	for _, p := range stale {
		_ = os.Remove(p)
	}
	fault(run.FaultCheckpoint)
	_, _ = conn.ExecContext(context.WithoutCancel(ctx), "CHECKPOINT")
	fault(run.FaultAfterCheckpoint)
	res.Replica = d.PublishReplica(ctx, opts.Fault)
	return res, nil
}

func ignoreDone(err error) error {
	if errors.Is(err, sql.ErrTxDone) {
		return nil
	}
	return err
}

func eraseTx(ctx context.Context, d *run.DB, tx *sql.Tx, j *job.Job, opts EraseOptions) (*EraseResult, []string, error) {
	keyCol, posCol := j.Pipeline.Key[0], j.Pipeline.Position
	st, err := catalog.ReadState(ctx, tx, j.Name)
	if err != nil {
		return nil, nil, err
	}
	if !opts.Replay {
		if err := st.CheckEpoch(j, opts.Epoch); err != nil {
			return nil, nil, err
		}
		if err := st.CheckParent(opts.ExpectParent); err != nil {
			return nil, nil, err
		}
	}
	if st.Snapshot == 0 {
		return nil, nil, job.Usage("job %s has no snapshot yet: nothing to erase", j.Name)
	}
	// Another job's table first, then this job's own pipeline and target.
	if err := catalog.CheckOwners(ctx, tx, j, true); err != nil {
		return nil, nil, err
	}
	if err := st.CheckIdentity(j); err != nil {
		return nil, nil, err
	}
	res := &EraseResult{Job: j.Name, Key: opts.Key, Parent: st.Snapshot, Snapshot: st.Snapshot + 1,
		Removed: map[string]int64{}, Inputs: []source.RewrittenInput{}}
	e := &eraser{res: res, keyCol: keyCol, posCol: posCol}

	// Tables: the target, its history and the companions.
	if err := e.fromTables(ctx, tx, j, opts); err != nil {
		return nil, nil, err
	}

	// Retained inputs of every snapshot of the job.
	snaps, err := catalog.ReadSnapshots(ctx, tx, j.Name, st.Snapshot)
	if err != nil {
		return nil, nil, err
	}
	rewritten, err := e.fromInputs(ctx, d, tx, j, snaps, opts)
	if err != nil {
		return nil, nil, err
	}
	if !e.found && !opts.Replay {
		prior, err := catalog.CountErasures(ctx, tx, j.Name, opts.Key)
		if err != nil {
			return nil, nil, err
		}
		if prior > 0 {
			// Erasing again finds nothing: the first erasure stands.
			res.AlreadyErased = true
			res.Snapshot = st.Snapshot
			return res, nil, nil
		}
		return nil, nil, fmt.Errorf("erase %s from job %s: the key is in no row, snapshot or retained input; nothing committed", opts.Key, j.Name)
	}
	if opts.Position != nil {
		e.maxPos = sql.NullInt64{Int64: *opts.Position, Valid: true}
	}
	if e.maxPos.Valid {
		res.Position = &e.maxPos.Int64
	}

	// Point every snapshot row at the rewritten files.
	stale, err := repoint(ctx, d, tx, j, snaps, rewritten, res.Inputs)
	if err != nil {
		return nil, nil, err
	}

	if err := catalog.ScrubPackets(ctx, tx, j.Name, j.Pipeline.Key, opts.Key); err != nil {
		return nil, nil, err
	}
	// The erasure and its snapshot.
	if err := catalog.RecordErasure(ctx, tx, j.Name, opts.Key, res.Position, res.Snapshot); err != nil {
		return nil, nil, err
	}
	// Checkpoints hold the subject in their target rows: rewritten without
	// it, the old files deleted after the commit like the inputs.
	scrubbed, err := run.ScrubCheckpoints(ctx, d, tx, j, keyCol, opts.Key)
	if err != nil {
		return nil, nil, err
	}
	stale = append(stale, scrubbed...)
	if err := catalog.WriteSnapshotOnly(ctx, tx, j, st, res.Snapshot, job.KindErase, catalog.SnapshotInputs{Files: []catalog.InputRef{}}, st.Key, st.PartsJSON()); err != nil {
		return nil, nil, err
	}
	if _, err := run.WriteCheckpoint(ctx, d, tx, j, res.Snapshot, opts.Fault); err != nil {
		return nil, nil, err
	}
	return res, stale, nil
}

// eraser is what the steps of an erasure share: the result so far, the
// key and position columns, the highest valid position of the key seen and
// whether any row held it.
type eraser struct {
	res            *EraseResult
	keyCol, posCol string
	maxPos         sql.NullInt64
	found          bool
}

func (e *eraser) seePos(p sql.NullInt64) {
	if p.Valid && (!e.maxPos.Valid || p.Int64 > e.maxPos.Int64) {
		e.maxPos = p
	}
}

// fromTables deletes the key's rows from the target, its history and the
// companions, noting the highest valid position they held.
func (e *eraser) fromTables(ctx context.Context, tx *sql.Tx, j *job.Job, opts EraseOptions) error {
	tables, err := companionTables(ctx, tx, j, e.keyCol)
	if err != nil {
		return err
	}
	type place struct{ label, name string }
	places := []place{{j.Table, job.QuoteIdent(j.Table)}}
	if ok, err := catalog.TableExists(ctx, tx, "idem", j.Name+"__history"); err != nil {
		return err
	} else if ok {
		places = append(places, place{"history", catalog.HistoryTable(j.Name)})
	}
	for _, t := range tables {
		if t != j.Table {
			places = append(places, place{t, job.QuoteIdent(t)})
		}
	}
	for _, p := range places {
		cols, err := columnsOf(ctx, tx, p.name)
		if err != nil {
			return err
		}
		where := " WHERE CAST(" + job.QuoteIdent(e.keyCol) + " AS VARCHAR) = ?"
		if cols[e.posCol] {
			// A row's position counts only where the pipeline judged it
			// valid: a table that stores outcomes keeps invalid rows as
			// received ("1e18"), and their outcome says so.
			valid := ""
			if cols["outcome"] {
				valid = " AND coalesce(outcome NOT LIKE 'invalid%', false)"
			}
			var pos sql.NullInt64
			if err := tx.QueryRowContext(ctx, "SELECT max("+source.PositionSQL("CAST("+job.QuoteIdent(e.posCol)+" AS VARCHAR)")+") FROM "+p.name+where+valid, opts.Key).Scan(&pos); err != nil {
				return fmt.Errorf("erase from %s: %w", p.label, catalog.TrimSQLError(err))
			}
			e.seePos(pos)
		}
		r, err := tx.ExecContext(ctx, "DELETE FROM "+p.name+where, opts.Key)
		if err != nil {
			return fmt.Errorf("erase from %s: %w", p.label, catalog.TrimSQLError(err))
		}
		n, _ := r.RowsAffected()
		e.res.Removed[p.label] = n
		e.found = e.found || n > 0
	}
	return nil
}

// fromInputs rewrites every retained input of the snapshots without the
// key's rows. It returns each input's replacement (itself when it held no
// such row).
func (e *eraser) fromInputs(ctx context.Context, d *run.DB, tx *sql.Tx, j *job.Job, snaps []*catalog.SnapshotRow, opts EraseOptions) (map[string]catalog.InputRef, error) {
	rewritten := map[string]catalog.InputRef{}
	// An expired snapshot's inputs may be gone from the store (idem
	// expire): there is nothing left of the subject to rewrite.
	retained, err := catalog.RetainedSums(ctx, tx)
	if err != nil {
		return nil, err
	}
	for _, s := range snaps {
		format := s.Inputs.Format
		if format == "" {
			format = j.Input.Format
		}
		for _, f := range s.Inputs.Files {
			if _, done := rewritten[f.SHA256]; done {
				continue
			}
			if !retained[f.SHA256] {
				rewritten[f.SHA256] = f
				continue
			}
			rw, pos, err := source.Rewrite(ctx, tx, d.Path(), f, format, source.KeyFilter(e.keyCol, e.posCol, opts.Key))
			if err != nil {
				return nil, err
			}
			// A retained input's rows carry no verdict; where the pipeline
			// stores every row's outcome, the position comes from there.
			if j.Pipeline.OutcomesTable == "" {
				e.seePos(pos)
			}
			if rw == nil {
				rewritten[f.SHA256] = f
				continue
			}
			e.found = true
			rewritten[f.SHA256] = catalog.InputRef{SHA256: rw.New, Bytes: rw.Bytes, Name: f.Name}
			e.res.Inputs = append(e.res.Inputs, *rw)
		}
	}
	return rewritten, nil
}

// repoint points every snapshot row at the rewritten inputs and records
// them; it returns the retained copies no row names any more, to delete
// after the commit.
func repoint(ctx context.Context, d *run.DB, tx *sql.Tx, j *job.Job, snaps []*catalog.SnapshotRow, rewritten map[string]catalog.InputRef, inputs []source.RewrittenInput) ([]string, error) {
	var stale []string
	if len(inputs) > 0 {
		for _, s := range snaps {
			changed := false
			for i, f := range s.Inputs.Files {
				if nf := rewritten[f.SHA256]; nf.SHA256 != f.SHA256 {
					s.Inputs.Files[i] = nf
					changed = true
				}
			}
			if !changed {
				continue
			}
			if err := catalog.SetSnapshotInputs(ctx, tx, j.Name, s.Snapshot, s.Inputs); err != nil {
				return nil, fmt.Errorf("erase: update inputs of snapshot %d: %w", s.Snapshot, err)
			}
		}
		for _, rw := range inputs {
			if err := catalog.RecordInput(ctx, tx, rw.New, rw.Bytes); err != nil {
				return nil, fmt.Errorf("erase: record input: %w", err)
			}
			refs, err := catalog.InputReferences(ctx, tx, rw.Old)
			if err != nil {
				return nil, fmt.Errorf("erase: count references to input: %w", err)
			}
			if refs == 0 {
				if err := catalog.ForgetInput(ctx, tx, rw.Old); err != nil {
					return nil, fmt.Errorf("erase: forget input: %w", err)
				}
				stale = append(stale, source.RetainedPath(d.Path(), rw.Old))
			}
		}
	}
	return stale, nil
}

func columnsOf(ctx context.Context, q catalog.Querier, qualified string) (map[string]bool, error) {
	rows, err := q.QueryContext(ctx, "SELECT * FROM "+qualified+" LIMIT 0")
	if err != nil {
		return nil, fmt.Errorf("columns of %s: %w", qualified, catalog.TrimSQLError(err))
	}
	defer rows.Close()
	names, err := rows.Columns()
	if err != nil {
		return nil, err
	}
	out := map[string]bool{}
	for _, n := range names {
		out[n] = true
	}
	return out, nil
}
