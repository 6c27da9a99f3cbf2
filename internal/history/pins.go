// The pins downstream jobs hold on an upstream job's snapshots: what the
// upstream's expiry keeps so that no kept downstream snapshot becomes
// unprovable.

package history

import (
	"context"
	"fmt"
	"sort"

	"github.com/idem-dev/idem/internal/catalog"
	"github.com/idem-dev/idem/internal/pipeline"
	"github.com/idem-dev/idem/internal/report"
)

// Pin is a downstream job's hold on one snapshot of an upstream job: the
// upstream's expiry keeps that snapshot readable.
type Pin struct {
	// Job is the downstream job, Snapshot the upstream's snapshot it holds.
	Job      string `json:"job"`
	Snapshot int64  `json:"snapshot"`
	// Rerun is the kept snapshot of Job whose rerun reads Snapshot (the
	// oldest such), 0 when the pin is Job's next read of the upstream's
	// changes (its state row's pin).
	Rerun int64 `json:"rerun,omitempty"`
}

// String says why the pin holds its snapshot.
func (p Pin) String() string {
	if p.Rerun == 0 {
		return fmt.Sprintf("%s (its next read of changes starts at snapshot %d)", p.Job, p.Snapshot)
	}
	return fmt.Sprintf("%s (the rerun of its kept snapshot %d reads snapshot %d)", p.Job, p.Rerun, p.Snapshot)
}

// DownstreamPins are the pins the jobs downstream of upstream hold on its
// snapshots, at most two per job, sorted by job then snapshot: the
// snapshot an apply job's next incremental read of its changes starts at
// (catalog.DownstreamPins), and the oldest snapshot of upstream that the
// rerun of some kept snapshot of a downstream job reads (RerunPins).
func DownstreamPins(ctx context.Context, q catalog.Querier, upstream string) ([]Pin, error) {
	next, err := catalog.DownstreamPins(ctx, q, upstream)
	if err != nil {
		return nil, err
	}
	out, err := RerunPins(ctx, q, upstream)
	if err != nil {
		return nil, err
	}
	for name, s := range next {
		if s >= 1 {
			out = append(out, Pin{Job: name, Snapshot: s})
		}
	}
	sort.Slice(out, func(a, b int) bool {
		if out[a].Job != out[b].Job {
			return out[a].Job < out[b].Job
		}
		if out[a].Snapshot != out[b].Snapshot {
			return out[a].Snapshot < out[b].Snapshot
		}
		return out[a].Rerun < out[b].Rerun
	})
	return out, nil
}

// RerunPins are, for each job that read upstream, the oldest snapshot of
// upstream that the rerun of one of its kept snapshots reads, with that
// kept snapshot. A rerun replays the snapshot's chain (replayChain) after
// the checkpoint it starts from (startCheckpoint); each replayed run over
// upstream reads upstream's history at the snapshot it pinned, and one
// over upstream's changes also at the snapshot its batch starts from
// (checked by exportUpstream and changesSelect). So a downstream apply
// job without checkpoints holds upstream back to the first snapshot it
// read, for as long as it keeps its own first snapshot: with [retention]
// checkpoint_every and keep_snapshots it holds only what the reruns of its
// kept snapshots after their checkpoints read.
func RerunPins(ctx context.Context, q catalog.Querier, upstream string) ([]Pin, error) {
	readers, err := catalog.Readers(ctx, q, upstream)
	if err != nil {
		return nil, err
	}
	var out []Pin
	for _, r := range readers {
		p, ok, err := rerunPin(ctx, q, upstream, r)
		if err != nil {
			return nil, err
		}
		if ok {
			out = append(out, p)
		}
	}
	return out, nil
}

// rerunPin is RerunPins for one reader; ok is false when no rerun of a
// kept snapshot of it reads upstream.
func rerunPin(ctx context.Context, q catalog.Querier, upstream string, r catalog.Reader) (Pin, bool, error) {
	ret, err := catalog.ReadRetention(ctx, q, r.Job)
	if err != nil {
		return Pin{}, false, err
	}
	snaps, err := catalog.ReadSnapshots(ctx, q, r.Job, r.Snapshot)
	if err != nil {
		return Pin{}, false, err
	}
	var cps []*catalog.Checkpoint
	if r.Mode == pipeline.ModeApply {
		if cps, err = catalog.Checkpoints(ctx, q, r.Job); err != nil {
			return Pin{}, false, err
		}
	}
	// reads[i]: the oldest snapshot of upstream the replay of snaps[i]
	// reads, 0 for none.
	reads := make([]int64, len(snaps))
	index := map[int64]int{}
	for i, s := range snaps {
		index[s.Snapshot] = i
		if reads[i], err = upstreamRead(upstream, r.Mode, s); err != nil {
			return Pin{}, false, fmt.Errorf("snapshot %d of %s: %w", s.Snapshot, r.Job, err)
		}
	}
	best := Pin{Job: r.Job}
	for i, s := range snaps {
		if s.Snapshot < ret.OldestKept {
			continue
		}
		chain := replayChainOf(r.Mode, snaps[:i+1])
		var from int64
		if c := rerunStartIn(cps, snaps[:i+1], s.Snapshot); c != nil {
			from = c.Snapshot
		}
		for _, row := range chain {
			n := reads[index[row.Snapshot]]
			if row.Snapshot <= from || n == 0 {
				continue
			}
			if best.Snapshot == 0 || n < best.Snapshot {
				best.Snapshot, best.Rerun = n, s.Snapshot
			}
		}
	}
	return best, best.Snapshot > 0, nil
}

// upstreamRead is the oldest snapshot of upstream that the replay of
// snapshot row s of a job of mode reads: the one it pinned, and for a batch
// of upstream's changes ("upstream:JOB:FROM-TO") FROM too when above 0; 0
// when the replay reads nothing of upstream (an erasure, a rollback, a run
// that did not read it).
func upstreamRead(upstream, mode string, s *catalog.SnapshotRow) (int64, error) {
	if s.Kind == report.KindErase || s.Kind == report.KindRollback || s.PartsJSON == "" {
		return 0, nil
	}
	parts, err := decodeParts(s.PartsJSON)
	if err != nil {
		return 0, fmt.Errorf("parts: %w", err)
	}
	var n int64
	for _, ref := range parts.Upstream {
		if ref.Job == upstream {
			n = ref.Snapshot
		}
	}
	if n == 0 || mode != pipeline.ModeApply || len(s.Inputs.Files) > 0 {
		return n, nil
	}
	ranges, err := batchRanges(s.BatchID)
	if err != nil {
		return n, nil // not a batch of changes: it read the pinned rows
	}
	if rg, ok := ranges[upstream]; ok && rg.From > 0 {
		n = min(n, rg.From)
	}
	return n, nil
}
