package history

import (
	"context"

	"github.com/idem-dev/idem/internal/catalog"
	"github.com/idem-dev/idem/internal/job"
	"github.com/idem-dev/idem/internal/report"
	"github.com/idem-dev/idem/internal/run"
)

// RerunStart is the checkpoint a rerun of snapshot of job j starts from,
// nil when it replays from the first snapshot: the newest checkpoint at or
// before snapshot such that no rollback between it and snapshot goes back
// before it (a checkpoint holds no history older than itself). chain is the
// snapshot rows up to snapshot (catalog.ReadSnapshots); nil reads them.
// Only an apply job starts from a checkpoint (see run.Checkpointed). A rerun of snapshot needs the checkpoint's files and
// the retained inputs of the snapshots after it.
func RerunStart(ctx context.Context, q catalog.Querier, j *job.Job, snapshot int64, chain []*catalog.SnapshotRow) (*catalog.Checkpoint, error) {
	if !checkpointed(j) {
		return nil, nil
	}
	cs, err := catalog.Checkpoints(ctx, q, j.Name)
	if err != nil || len(cs) == 0 {
		return nil, err
	}
	if chain == nil {
		if chain, err = catalog.ReadSnapshots(ctx, q, j.Name, snapshot); err != nil {
			return nil, err
		}
	}
	return rerunStartIn(cs, chain, snapshot), nil
}

// checkpointed says a rerun of job j may start from a checkpoint: an apply
// job (see run.Checkpointed).
func checkpointed(j *job.Job) bool { return run.CheckpointsKept(j) }

// rerunStartIn is RerunStart over the job's checkpoints cs (oldest first)
// and its snapshot rows up to snapshot.
func rerunStartIn(cs []*catalog.Checkpoint, chain []*catalog.SnapshotRow, snapshot int64) *catalog.Checkpoint {
	present := map[int64]bool{}
	for _, row := range chain {
		present[row.Snapshot] = true
	}
	for i := len(cs) - 1; i >= 0; i-- {
		c := cs[i]
		if c.Snapshot > snapshot || !present[c.Snapshot] {
			continue
		}
		ok := true
		for _, row := range chain {
			if row.Snapshot > c.Snapshot && row.Snapshot <= snapshot && row.Kind == report.KindRollback && row.Inputs.RollbackTo != nil && *row.Inputs.RollbackTo < c.Snapshot {
				ok = false
				break
			}
		}
		if ok {
			return c
		}
	}
	return nil
}

// RerunNeeds is what a rerun of snapshot of job j reads besides the
// database: the checkpoint it starts from (nil: none, it replays from the
// first snapshot) and the retained inputs of the snapshots it replays
// after it. Expiry keeps these for every kept snapshot.
func RerunNeeds(ctx context.Context, q catalog.Querier, j *job.Job, snapshot int64) (*catalog.Checkpoint, []catalog.InputRef, error) {
	snaps, err := catalog.ReadSnapshots(ctx, q, j.Name, snapshot)
	if err != nil {
		return nil, nil, err
	}
	c, err := RerunStart(ctx, q, j, snapshot, snaps)
	if err != nil {
		return nil, nil, err
	}
	var inputs []catalog.InputRef
	for _, row := range replayChain(j, snaps) {
		if c == nil || row.Snapshot > c.Snapshot {
			inputs = append(inputs, row.Inputs.Files...)
		}
	}
	return c, inputs, nil
}
