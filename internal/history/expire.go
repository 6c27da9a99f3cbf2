package history

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sort"

	"github.com/idem-dev/idem/internal/catalog"
	"github.com/idem-dev/idem/internal/job"
	"github.com/idem-dev/idem/internal/report"
	"github.com/idem-dev/idem/internal/run"
	"github.com/idem-dev/idem/internal/source"
)

// Fault points of an expiry (crash tests), passed to ExpireOptions.Fault:
// after every delete, before COMMIT; after COMMIT, before the retained files
// no row names any more are swept. A standalone expiry then passes
// run.FaultCheckpoint and run.FaultAfterCheckpoint around its CHECKPOINT.
const (
	FaultExpireBeforeCommit = "expire_before_commit"
	FaultExpireAfterCommit  = "expire_after_commit"
)

// ExpireOptions say how many snapshots idem expire keeps.
type ExpireOptions struct {
	// Keep is the number of newest snapshots that stay readable; 0 takes
	// the job's [retention] keep_snapshots.
	Keep int64
	// DryRun reports what would be removed and changes nothing.
	DryRun bool
	// Epoch, when set, refuses the expiry (ErrRefused) unless it is the
	// job's current writer epoch; a job with [job] fencing = "required"
	// refuses an expiry without one, as every writing command does.
	Epoch *int64
	Fault func(point string)
	// afterRun is the expiry that follows a run: the run checked the
	// writer's epoch and does the CHECKPOINT itself.
	afterRun bool
}

func (o ExpireOptions) fault(point string) {
	if o.Fault != nil {
		o.Fault(point)
	}
}

// ExpireResult reports an expiry. Counts are of what was removed (with
// DryRun: what would be).
type ExpireResult struct {
	Job    string `json:"job"`
	DryRun bool   `json:"dry_run"`
	Keep   int64  `json:"keep_snapshots"`
	Latest int64  `json:"latest"`
	// OldestKept is the oldest readable snapshot after the expiry, and
	// Previous the one before it; Expired = OldestKept - Previous.
	OldestKept int64 `json:"oldest_kept"`
	Previous   int64 `json:"previous_oldest_kept"`
	Expired    int64 `json:"expired"`
	// HeldBy names the downstream jobs that hold a snapshot of this job
	// older than the window, each with the oldest it holds: expiry keeps
	// it, so OldestKept may be below Latest-Keep+1. Pins says why each
	// holds it (see DownstreamPins): an apply job's next incremental read
	// of this job's changes starts there, or the rerun of one of its kept
	// snapshots reads it.
	HeldBy map[string]int64 `json:"held_by"`
	Pins   []Pin            `json:"pins"`
	// InputsFrom is the first snapshot whose retained inputs a rerun of a
	// kept snapshot needs (NeededFrom).
	InputsFrom  int64 `json:"inputs_from"`
	HistoryRows int64 `json:"history_rows"`
	OutcomeRows int64 `json:"outcome_rows"`
	Packets     int64 `json:"packets"`
	Inputs      int   `json:"inputs"`
	InputBytes  int64 `json:"input_bytes"`
	// Checkpoints are the checkpoints older than OldestKept that no rerun
	// of a kept snapshot starts from, and their bytes.
	Checkpoints     int   `json:"checkpoints"`
	CheckpointBytes int64 `json:"checkpoint_bytes"`
	// Replica reports the read replica published after a standalone
	// expiry ([duckdb] read_replica).
	Replica *run.ReplicaInfo `json:"replica,omitempty"`
}

// ExpireAfterRun is the run.Expirer idem uses: the expiry of a job with
// [retention] keep_snapshots that follows each of its runs, leaving the
// CHECKPOINT to the run.
func ExpireAfterRun(ctx context.Context, d *run.DB, j *job.Job, fault func(string)) (*run.Expiry, error) {
	res, err := Expire(ctx, d, j, ExpireOptions{Fault: fault, afterRun: true})
	if err != nil {
		return nil, err
	}
	return &run.Expiry{OldestKept: res.OldestKept, Expired: res.Expired}, nil
}

// Expire expires the snapshots of job j older than its newest Keep, in ONE
// transaction: the history rows visible only in expired snapshots
// (catalog.ExpireHistory), the outcome rows of expired batches, their
// release packets, and the records of retained inputs that no kept
// snapshot's rerun needs (NeededFrom) and no other job keeps; it records
// the oldest kept snapshot in idem.retention, from which every pinned read
// of an older one is refused (exit 3). The ledger, the snapshot rows, the
// run log, tombstones and erasures stay, so an expired batch id is still
// already_committed. A snapshot of this job that a downstream job holds is
// kept (HeldBy, Pins): an apply job's next incremental read starts from it,
// or the rerun of a kept snapshot of a downstream job reads it, so that no
// kept downstream snapshot becomes unprovable. After the COMMIT the
// retained files no row names are deleted (source.Sweep); a kill before
// that leaves them to the next writable open. Expiring what is already
// expired changes nothing and commits nothing. A wrong opts.Epoch, or none
// on a job that requires fencing, is refused (ErrRefused) before anything
// is read, dry run included.
func Expire(ctx context.Context, d *run.DB, j *job.Job, opts ExpireOptions) (*ExpireResult, error) {
	keep := opts.Keep
	if keep == 0 {
		keep = j.Retention.KeepSnapshots
	}
	if keep < 1 {
		return nil, report.Usage("expire %s: say how many snapshots to keep: --keep-snapshots N, or [retention] keep_snapshots in the job file", j.Name)
	}
	if d.ReadOnly() && !opts.DryRun {
		return nil, errors.New("database opened read-only")
	}
	conn, tx, err := d.BeginPinned(ctx)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	defer func() { _ = tx.Rollback() }() // first: an open transaction holds conn, whose Close would wait for it (a panic)
	if !opts.afterRun {
		st, err := catalog.ReadState(ctx, tx, j.Name)
		if err == nil {
			err = errors.Join(st.CheckIdentity(j), st.CheckEpoch(j, opts.Epoch))
		}
		if err != nil {
			return nil, errors.Join(err, ignoreDone(tx.Rollback()))
		}
	}
	pl, err := planExpiry(ctx, tx, j, keep)
	if err != nil {
		return nil, errors.Join(err, ignoreDone(tx.Rollback()))
	}
	res := pl.result
	res.DryRun = opts.DryRun
	if opts.DryRun || res.Expired == 0 && len(pl.forget) == 0 {
		return res, ignoreDone(tx.Rollback())
	}
	if err := pl.apply(ctx, tx, j); err != nil {
		return nil, errors.Join(err, ignoreDone(tx.Rollback()))
	}
	opts.fault(FaultExpireBeforeCommit)
	if err := tx.Commit(); err != nil {
		return nil, fmt.Errorf("commit expiry of %s: %w", j.Name, err)
	}
	opts.fault(FaultExpireAfterCommit)
	// The files of the forgotten inputs: named by no committed row now.
	_, _ = source.Sweep(context.WithoutCancel(ctx), d.SQL(), d.Path())
	if !opts.afterRun {
		opts.fault(run.FaultCheckpoint)
		_, _ = conn.ExecContext(context.WithoutCancel(ctx), "CHECKPOINT")
		opts.fault(run.FaultAfterCheckpoint)
		res.Replica = d.PublishReplica(ctx, opts.Fault)
	}
	return res, nil
}

// expiryPlan is what one expiry removes, read inside its transaction.
type expiryPlan struct {
	result *ExpireResult
	prev   catalog.Retention
	next   catalog.Retention
	forget []string // retained inputs to forget
	// checkpoints no rerun of a kept snapshot starts from
	checkpoints []*catalog.Checkpoint
}

// planExpiry reads everything the expiry of job j keeping keep snapshots
// decides, inside tx.
func planExpiry(ctx context.Context, q catalog.Querier, j *job.Job, keep int64) (*expiryPlan, error) {
	st, err := catalog.ReadState(ctx, q, j.Name)
	if err != nil {
		return nil, err
	}
	prev, err := catalog.ReadRetention(ctx, q, j.Name)
	if err != nil {
		return nil, err
	}
	res := &ExpireResult{Job: j.Name, Keep: keep, Latest: st.Snapshot, Previous: prev.OldestKept,
		OldestKept: prev.OldestKept, InputsFrom: prev.InputsFrom, HeldBy: map[string]int64{}, Pins: []Pin{}}
	pl := &expiryPlan{result: res, prev: prev, next: prev}
	if st.Snapshot == 0 {
		return pl, nil
	}
	oldest := max(st.Snapshot-keep+1, 1)
	if oldest > prev.OldestKept {
		// Something may expire: what downstream jobs hold back. (The
		// check after every run reads the pins only then.)
		pins, err := DownstreamPins(ctx, q, j.Name)
		if err != nil {
			return nil, err
		}
		for _, p := range pins {
			if p.Snapshot >= prev.OldestKept && p.Snapshot < oldest {
				res.Pins = append(res.Pins, p)
				if h, ok := res.HeldBy[p.Job]; !ok || p.Snapshot < h {
					res.HeldBy[p.Job] = p.Snapshot
				}
			}
		}
		for _, p := range res.Pins {
			oldest = min(oldest, p.Snapshot)
		}
	}
	// Expiry never brings a snapshot back.
	oldest = max(oldest, prev.OldestKept)
	snaps, err := catalog.ReadSnapshots(ctx, q, j.Name, st.Snapshot)
	if err != nil {
		return nil, err
	}
	cps, err := catalog.Checkpoints(ctx, q, j.Name)
	if err != nil {
		return nil, err
	}
	inputsFrom := max(NeededFrom(j, snaps, cps)(oldest), prev.InputsFrom)
	pl.next = catalog.Retention{OldestKept: oldest, InputsFrom: inputsFrom}
	res.OldestKept, res.InputsFrom, res.Expired = oldest, inputsFrom, oldest-prev.OldestKept
	if pl.next == prev {
		// Nothing newly due: the check after every run stops here,
		// before reading the history.
		return pl, nil
	}

	// History rows closed at or before the new oldest kept; those closed
	// at or before the previous one are gone already.
	closed, err := catalog.ClosedHistoryRows(ctx, q, j.Name)
	if err != nil {
		return nil, err
	}
	for s, n := range closed {
		if s <= oldest {
			res.HistoryRows += n
		}
	}
	outcomes, err := catalog.OutcomeRowsBySnapshot(ctx, q, j.Name, OutcomesTable(j))
	if err != nil {
		return nil, err
	}
	for s, n := range outcomes {
		if s < oldest {
			res.OutcomeRows += n
		}
	}
	if res.Packets, err = catalog.CountPackets(ctx, q, j.Name, oldest); err != nil {
		return nil, err
	}
	elsewhere, err := catalog.InputsNamedElsewhere(ctx, q, j.Name)
	if err != nil {
		return nil, err
	}
	sizes, err := catalog.RetainedInputSizes(ctx, q)
	if err != nil {
		return nil, err
	}
	pl.forget, res.InputBytes = ExpirableInputs(snaps, inputsFrom, elsewhere, sizes)
	res.Inputs = len(pl.forget)
	pl.checkpoints = expirableCheckpoints(j, snaps, cps, oldest)
	for _, c := range pl.checkpoints {
		res.Checkpoints++
		res.CheckpointBytes += c.Bytes
	}
	return pl, nil
}

// apply removes what the plan says, in tx.
func (pl *expiryPlan) apply(ctx context.Context, tx *sql.Tx, j *job.Job) error {
	oldest := pl.next.OldestKept
	if err := catalog.ExpireHistory(ctx, tx, j.Name, oldest); err != nil {
		return err
	}
	if err := catalog.ExpireOutcomes(ctx, tx, j.Name, OutcomesTable(j), oldest); err != nil {
		return err
	}
	if _, err := catalog.ExpirePackets(ctx, tx, j.Name, oldest); err != nil {
		return err
	}
	if err := catalog.ForgetInputs(ctx, tx, pl.forget); err != nil {
		return err
	}
	if err := forgetCheckpoints(ctx, tx, j, pl.checkpoints); err != nil {
		return err
	}
	// The model and macro texts only expired snapshots were built with:
	// no rerun of a kept one reads them.
	if _, err := catalog.ForgetTexts(ctx, tx, j.Name, pl.next.InputsFrom, j.TransformPart().SHA256); err != nil {
		return err
	}
	if err := catalog.WriteRetention(ctx, tx, j.Name, pl.next); err != nil {
		return err
	}
	msg := fmt.Sprintf("expired snapshots %d-%d (oldest kept: %d); %d history rows, %d outcome rows, %d retained inputs, %d checkpoints",
		pl.prev.OldestKept, pl.next.OldestKept-1, oldest, pl.result.HistoryRows, pl.result.OutcomeRows, pl.result.Inputs, pl.result.Checkpoints)
	if pl.result.Expired == 0 {
		msg = fmt.Sprintf("forgot %d retained inputs no kept snapshot needs", pl.result.Inputs)
	}
	st, err := catalog.ReadState(ctx, tx, j.Name)
	if err != nil {
		return err
	}
	if err := catalog.InsertRun(ctx, tx, catalog.RunRow{Job: j.Name, Decision: "expired", Changed: "[]",
		Snapshot: st.Snapshot, Cursor: st.Cursor, Epoch: st.Epoch, Message: msg, Commit: true}); err != nil {
		return fmt.Errorf("write run log: %w", err)
	}
	return nil
}

// NeededFrom says, for an oldest kept snapshot K, the first snapshot of
// the job whose retained inputs a rerun of some kept snapshot (K and
// after) still replays: the start of the replay chain of each kept
// snapshot, at the lowest. A rerun of an apply job that reads files starts
// after the checkpoint RerunStart picks (cps: the job's checkpoints,
// oldest first), else from snapshot 1; a refresh job from its last load of
// the whole target at or before the snapshot (from 1 when a rollback
// follows it). This is the one place that rule lives. The returned
// function answers any K in constant time (du asks for every kept
// snapshot).
func NeededFrom(j *job.Job, snaps []*catalog.SnapshotRow, cps []*catalog.Checkpoint) func(oldestKept int64) int64 {
	// fromAt[i]: the lowest chain start of snaps[i:].
	fromAt := make([]int64, len(snaps)+1)
	fromAt[len(snaps)] = -1
	for i := len(snaps) - 1; i >= 0; i-- {
		start := snaps[i].Snapshot
		if c := checkpointFor(j, cps, snaps[:i+1]); c != nil {
			start = c.Snapshot + 1
		} else if chain := replayChain(j, snaps[:i+1]); len(chain) > 0 {
			start = chain[0].Snapshot
		}
		fromAt[i] = start
		if next := fromAt[i+1]; next >= 0 && next < start {
			fromAt[i] = next
		}
	}
	return func(oldestKept int64) int64 {
		i := sort.Search(len(snaps), func(i int) bool { return snaps[i].Snapshot >= oldestKept })
		if fromAt[i] < 0 {
			return oldestKept
		}
		return min(fromAt[i], oldestKept)
	}
}

// checkpointFor is the checkpoint a rerun of the last of snaps starts
// from, nil when it replays from the start of its chain.
func checkpointFor(j *job.Job, cps []*catalog.Checkpoint, snaps []*catalog.SnapshotRow) *catalog.Checkpoint {
	if len(cps) == 0 || len(snaps) == 0 || !checkpointed(j) {
		return nil
	}
	return rerunStartIn(cps, snaps, snaps[len(snaps)-1].Snapshot)
}

// expirableCheckpoints are the checkpoints older than the oldest kept
// snapshot that no rerun of a kept snapshot starts from.
func expirableCheckpoints(j *job.Job, snaps []*catalog.SnapshotRow, cps []*catalog.Checkpoint, oldestKept int64) []*catalog.Checkpoint {
	used := map[int64]bool{}
	for i, s := range snaps {
		if s.Snapshot < oldestKept {
			continue
		}
		if c := checkpointFor(j, cps, snaps[:i+1]); c != nil {
			used[c.Snapshot] = true
		}
	}
	var out []*catalog.Checkpoint
	for _, c := range cps {
		if c.Snapshot < oldestKept && !used[c.Snapshot] {
			out = append(out, c)
		}
	}
	return out
}

// forgetCheckpoints deletes the checkpoints' rows, in tx, and forgets the
// stored files (manifest and parts) that no remaining checkpoint of any
// job names: the sweep after the commit deletes them.
func forgetCheckpoints(ctx context.Context, tx *sql.Tx, j *job.Job, cps []*catalog.Checkpoint) error {
	var sums []string
	for _, c := range cps {
		if err := catalog.DeleteCheckpoint(ctx, tx, j.Name, c.Snapshot); err != nil {
			return err
		}
		sums = append(sums, c.SHA256)
		for _, f := range c.Files {
			sums = append(sums, f.SHA256)
		}
	}
	var forget []string
	seen := map[string]bool{}
	for _, sum := range sums {
		if seen[sum] {
			continue
		}
		seen[sum] = true
		n, err := catalog.CheckpointReferences(ctx, tx, sum)
		if err != nil {
			return err
		}
		if n == 0 {
			forget = append(forget, sum)
		}
	}
	sort.Strings(forget)
	return catalog.ForgetInputs(ctx, tx, forget)
}

// ExpirableInputs are the retained inputs (recorded in sizes) that
// snapshots of the job below inputsFrom name and that no snapshot of the
// job at or above it, and no other job (elsewhere, see
// catalog.InputsNamedElsewhere), needs; with their bytes.
func ExpirableInputs(snaps []*catalog.SnapshotRow, inputsFrom int64, elsewhere map[string]bool, sizes map[string]int64) ([]string, int64) {
	keep := map[string]bool{}
	for _, s := range snaps {
		if s.Snapshot >= inputsFrom {
			for _, f := range s.Inputs.Files {
				keep[f.SHA256] = true
			}
		}
	}
	seen := map[string]bool{}
	var out []string
	var bytes int64
	for _, s := range snaps {
		if s.Snapshot >= inputsFrom {
			continue
		}
		for _, f := range s.Inputs.Files {
			size, recorded := sizes[f.SHA256]
			if seen[f.SHA256] || keep[f.SHA256] || elsewhere[f.SHA256] || !recorded {
				continue
			}
			seen[f.SHA256] = true
			out = append(out, f.SHA256)
			bytes += size
		}
	}
	sort.Strings(out)
	return out, bytes
}

// OutcomesTable is the job's outcomes table, "" for a pipeline without one.
func OutcomesTable(j *job.Job) string {
	if j.Pipeline.OutcomesTable == "" {
		return ""
	}
	return j.Table + j.Pipeline.OutcomesTable
}
