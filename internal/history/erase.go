package history

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"

	"github.com/idem-dev/idem/internal/catalog"
	"github.com/idem-dev/idem/internal/dbfile"
	"github.com/idem-dev/idem/internal/job"
	"github.com/idem-dev/idem/internal/report"
	"github.com/idem-dev/idem/internal/run"
	"github.com/idem-dev/idem/internal/source"
)

// EraseOptions name the subject to erase: a value of the pipeline's key
// (Key), or a value of the job's [privacy] subject columns (Subject).
type EraseOptions struct {
	Key string
	// Subject erases every row in which one of the job's [privacy] subject
	// columns holds it, and every other row of the same keys (another
	// version of the same record).
	Subject string
	// SubjectColumns overrides the job's [privacy] subject (a rerun
	// replays an erasure by the columns it recorded).
	SubjectColumns []string
	// Position overrides the erasure point (the highest position seen for
	// the key). A pinned re-run uses it to replay a recorded erasure.
	Position *int64
	// Replay commits the erasure even where the key is found nowhere (a
	// pinned re-run replays it over inputs already rewritten without it).
	// A replay is not a writer of the job and is never fenced.
	Replay bool
	// Recorded is the recorded erasure a rerun replays (erase_replay.go):
	// the erasure is recorded with its salt and hash, not Key's or
	// Subject's.
	Recorded *catalog.Erasure
	// ExpectParent and Epoch are the writer guards of a run (exit 3).
	ExpectParent *int64
	Epoch        *int64
	// DryRun rolls the erasure back once it is done (EraseChain): its
	// result says what it would change.
	DryRun bool
	// Publishes says the caller publishes every job declaring
	// [publish.iceberg] after the erasure commits (idem-iceberg); without
	// it EraseChain refuses to erase such a job (erase_publish.go).
	Publishes bool
	// AnyRoot says the subject need be in only one of the jobs an erasure
	// starts from (a project's): the others are reported
	// (ChainEraseResult.NotHeld); held nowhere, nothing is committed.
	AnyRoot bool
	// cascade marks the erasure of a job that reads an erased one: a job
	// that holds none of the rows is left as it is (no result).
	cascade bool
	// Fault is called at the fault points an erasure passes (after_target:
	// rows deleted and inputs rewritten; before_commit; after_commit, before
	// the replaced files are deleted; checkpoint; after_checkpoint), as
	// RunOptions.Fault is for a run.
	Fault func(point string)
}

// EraseResult reports an erasure. It never holds the subject's payload.
type EraseResult struct {
	Job string `json:"job"`
	// Key is the key value erased (--key); with --subject, Subject is the
	// value, SubjectColumns the columns it was looked for in and Keys the
	// values of the pipeline's key its rows had.
	Key            string   `json:"key"`
	Subject        string   `json:"subject,omitempty"`
	SubjectColumns []string `json:"subject_columns,omitempty"`
	Keys           []string `json:"keys,omitempty"`
	// KeyColumns name the columns of a composite key erased by --key: Key
	// is then the JSON array of their values, in this order.
	KeyColumns []string `json:"key_columns,omitempty"`
	Snapshot   int64    `json:"snapshot"`
	Parent     int64    `json:"parent"`
	// Position is the erasure point: a later batch carrying the key at or
	// below it gets outcome erased.
	Position *int64 `json:"position"`
	// Removed counts the rows removed per table; history counts every
	// snapshot's version of the rows.
	Removed map[string]int64        `json:"removed"`
	Inputs  []source.RewrittenInput `json:"inputs"`
	// Packets are the snapshots whose release packet was rewritten (the
	// sha256 it replaced is kept in it; idem show).
	Packets []int64 `json:"packets_rewritten,omitempty"`
	// AlreadyErased says the key was erased before and found nowhere:
	// nothing was committed and Snapshot is the latest.
	AlreadyErased bool `json:"already_erased"`
	// Downstream are the erasures in the jobs that read this one,
	// Recomputed the models rebuilt without the subject and Untouched the
	// readers that held none of it (idem erase JOB).
	Downstream []*EraseResult     `json:"downstream,omitempty"`
	Recomputed []*RecomputeResult `json:"recomputed,omitempty"`
	Untouched  []string           `json:"untouched,omitempty"`
	DryRun     bool               `json:"dry_run,omitempty"`
	// Replica reports the read replica published after the erasure
	// ([duckdb] read_replica).
	Replica *run.ReplicaInfo `json:"replica,omitempty"`
	// Compact reports the compaction of the database file after the
	// erasure (idem erase without --no-compact).
	Compact *dbfile.CompactResult `json:"compact,omitempty"`
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
	m, err := eraseMatchOf(j, opts)
	if err != nil {
		return nil, err
	}
	conn, tx, err := d.BeginPinned(ctx)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	defer func() { _ = tx.Rollback() }() // first: an open transaction holds conn, whose Close would wait for it (a panic)
	res, stale, err := eraseTx(ctx, d, tx, j, m, opts)
	end := erasureEnd{jobs: []string{j.Name}, stale: stale, commit: err == nil && !res.AlreadyErased}
	replica, err := end.finish(ctx, d, conn, tx, err, opts.Fault)
	if err != nil {
		return nil, err
	}
	res.Replica = replica
	return res, nil
}

// erasureEnd is how an erasure's transaction ends: whether it commits, the
// jobs it changed and the files that held the subject, to delete after the
// commit.
type erasureEnd struct {
	commit bool
	jobs   []string
	stale  []string
}

// finish ends an erasure's transaction tx: rolled back when the work
// failed (workErr) or changed nothing (the files it rewrote are named by
// no committed row: swept); otherwise the replica holding the subject and
// the rows kept by reruns of the jobs go before the COMMIT (a kill until
// the new replica is published leaves none, which the next writable open
// publishes), and after it the erasure journal records it, the stale files
// go (one that cannot be deleted now goes at the next writable open), the
// database is checkpointed and the replica published. A journal that
// cannot be written is an error returned after all that: the erasure
// stands. It passes the erasure's fault points.
func (e erasureEnd) finish(ctx context.Context, d *run.DB, conn *sql.Conn, tx *sql.Tx, workErr error, faultHook func(string)) (*run.ReplicaInfo, error) {
	fault := func(point string) {
		if faultHook != nil {
			faultHook(point)
		}
	}
	if workErr != nil || !e.commit {
		rbErr := ignoreDone(tx.Rollback())
		_, _ = source.Sweep(context.WithoutCancel(ctx), d.SQL(), d.Path())
		return nil, errors.Join(workErr, rbErr)
	}
	fault(run.FaultAfterTarget)
	if err := d.WithdrawReplica(); err != nil {
		return nil, errors.Join(err, ignoreDone(tx.Rollback()))
	}
	// The rows kept by reruns that did not reproduce are diagnostics,
	// rebuilt by the next such rerun.
	for _, name := range e.jobs {
		if err := removeRerunKept(d.Path(), name); err != nil {
			return nil, errors.Join(fmt.Errorf("erase: remove the rows kept by reruns: %w", err), ignoreDone(tx.Rollback()))
		}
	}
	fault(run.FaultBeforeCommit)
	if err := tx.Commit(); err != nil {
		_, _ = source.Sweep(context.WithoutCancel(ctx), d.SQL(), d.Path())
		return nil, fmt.Errorf("commit erasure: %w", err)
	}
	fault(run.FaultAfterCommit)
	// The journal beside the database records the erasure, so that a copy
	// of the database from before it is refused (a kill before this line is
	// mended by the next writable open).
	journalErr := d.SyncJournal(context.WithoutCancel(ctx))
	if journalErr != nil {
		journalErr = fmt.Errorf("the erasure is committed, but the erasure journal %s was not written (the next writable open of the database writes it; then run idem compact --db %s): %w", run.JournalPath(d.Path()), d.Path(), journalErr)
	}
	for _, p := range e.stale {
		_ = os.Remove(p)
	}
	_, _ = source.Sweep(context.WithoutCancel(ctx), d.SQL(), d.Path())
	fault(run.FaultCheckpoint)
	_, _ = conn.ExecContext(context.WithoutCancel(ctx), "CHECKPOINT")
	fault(run.FaultAfterCheckpoint)
	return d.PublishReplica(ctx, faultHook), journalErr
}

func ignoreDone(err error) error {
	if errors.Is(err, sql.ErrTxDone) {
		return nil
	}
	return err
}

func eraseTx(ctx context.Context, d *run.DB, tx *sql.Tx, j *job.Job, m *eraseMatch, opts EraseOptions) (*EraseResult, []string, error) {
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
		return nil, nil, report.Usage("job %s has no snapshot yet: nothing to erase", j.Name)
	}
	// Another job's table first, then this job's own pipeline and target.
	if err := catalog.CheckOwners(ctx, tx, j, true); err != nil {
		return nil, nil, err
	}
	if err := st.CheckIdentity(j); err != nil {
		return nil, nil, err
	}
	res := &EraseResult{Job: j.Name, Parent: st.Snapshot, Snapshot: st.Snapshot + 1,
		Removed: map[string]int64{}, Inputs: []source.RewrittenInput{}}
	if m.subject != nil {
		res.Subject, res.SubjectColumns = m.value, m.subject
	} else {
		res.Key = m.value
		if m.all {
			res.KeyColumns = keyColumns(j)
		}
	}
	e := &eraser{res: res, m: m, posCol: j.Pipeline.Position, keyPos: map[string]sql.NullInt64{}}

	// Tables: the target, its history and the companions.
	places, err := e.places(ctx, tx, j)
	if err != nil {
		return nil, nil, err
	}
	if err := e.resolveKeys(ctx, tx, places); err != nil {
		return nil, nil, err
	}
	if err := e.fromTables(ctx, tx, places); err != nil {
		return nil, nil, err
	}

	// Retained inputs of every snapshot of the job.
	snaps, err := catalog.ReadSnapshots(ctx, tx, j.Name, st.Snapshot)
	if err != nil {
		return nil, nil, err
	}
	rewritten, err := e.fromInputs(ctx, d, tx, j, snaps)
	if err != nil {
		return nil, nil, err
	}
	if !e.found && opts.cascade {
		return nil, nil, nil
	}
	if !e.found && !opts.Replay {
		prior, err := catalog.CountErasures(ctx, tx, j.Name, m.value, m.subject != nil)
		if err != nil {
			return nil, nil, err
		}
		if prior > 0 {
			// Erasing again finds nothing: the first erasure stands.
			res.AlreadyErased = true
			res.Snapshot = st.Snapshot
			return res, nil, nil
		}
		return nil, nil, notHeldError(j, m)
	}
	if m.subject == nil {
		pos := e.maxPos
		if opts.Position != nil {
			pos = sql.NullInt64{Int64: *opts.Position, Valid: true}
		}
		if pos.Valid {
			res.Position = &pos.Int64
		}
	}

	// Point every snapshot row at the rewritten files.
	stale, err := repoint(ctx, d, tx, j, snaps, rewritten, res.Inputs)
	if err != nil {
		return nil, nil, err
	}
	if err := scrubRejects(ctx, tx, j, snaps, m); err != nil {
		return nil, nil, err
	}
	for _, col := range slices.Sorted(maps.Keys(m.values)) {
		for _, v := range m.values[col] {
			if err := catalog.ScrubPackets(ctx, tx, j.Name, []string{col}, v); err != nil {
				return nil, nil, err
			}
		}
	}
	// A run log message of an older idem may quote the subject's rows.
	if _, err := catalog.ScrubRunMessages(ctx, tx, j.Name, res.Snapshot, []string{m.value}); err != nil {
		return nil, nil, err
	}
	// The erasure and its snapshot: an erasure by subject is recorded with
	// its columns, and, for each key its rows had, as an erasure of that
	// key (the guard against an older batch of the key).
	if r := opts.Recorded; r != nil && r.Salt != "" {
		err = catalog.RecordErasedHash(ctx, tx, j.Name, r.Salt, r.Key, res.Position, res.Snapshot, m.subject)
	} else {
		err = catalog.RecordErasure(ctx, tx, j.Name, m.value, res.Position, res.Snapshot, m.subject)
	}
	if err != nil {
		return nil, nil, err
	}
	if m.subject != nil && m.keyCol != "" && !m.all {
		res.Keys = m.values[m.keyCol]
		for _, k := range res.Keys {
			var pos *int64
			if p := e.keyPos[k]; p.Valid {
				pos = &p.Int64
			}
			if err := catalog.RecordErasure(ctx, tx, j.Name, k, pos, res.Snapshot, nil); err != nil {
				return nil, nil, err
			}
		}
	}
	// Checkpoints hold the subject in their target rows: rewritten without
	// it, the old files deleted after the commit like the inputs.
	scrubbed, err := run.ScrubCheckpoints(ctx, d, tx, j, m.filter(""))
	if err != nil {
		return nil, nil, err
	}
	stale = append(stale, scrubbed...)
	key, parts := st.Key, st.PartsJSON()
	if opts.cascade {
		// A reader whose upstream this erasure moved reads on from there.
		if key, parts, err = repinErased(ctx, tx, st); err != nil {
			return nil, nil, err
		}
	}
	if err := catalog.WriteSnapshotOnly(ctx, tx, j, st, res.Snapshot, report.KindErase, catalog.SnapshotInputs{Files: []catalog.InputRef{}}, key, parts); err != nil {
		return nil, nil, err
	}
	if _, err := run.WriteCheckpoint(ctx, d, tx, j, res.Snapshot, opts.Fault); err != nil {
		return nil, nil, err
	}
	return res, stale, nil
}
