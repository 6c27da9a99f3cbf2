package history

import (
	"context"
	"fmt"

	"github.com/idem-dev/idem/internal/catalog"
	"github.com/idem-dev/idem/internal/job"
	"github.com/idem-dev/idem/internal/pipeline"
	"github.com/idem-dev/idem/internal/report"
	"github.com/idem-dev/idem/internal/run"
	"github.com/idem-dev/idem/internal/source"
)

// replayIceberg replays one snapshot of a job with [input] iceberg in the
// scratch database: it reads the lake snapshot the snapshot pinned (never
// the table's current one), and is refused (exit 3) when the table no
// longer holds it or is another table now, or when an erasure after the
// rebuilt snapshot removed rows the lake still holds.
func replayIceberg(ctx context.Context, d, scratch *run.DB, j *job.Job, row *catalog.SnapshotRow, pin source.IcebergPin, ropts RerunOptions) error {
	pin.IdemSnapshot = row.Snapshot
	if ropts.Snapshot > 0 {
		// An erasure after the rebuilt snapshot rewrote it without the
		// erased rows, which the lake still holds: the rebuild would
		// bring them back (and keep them beside the database).
		erasures, err := catalog.ErasuresBySnapshot(ctx, d.SQL(), j.Name)
		if err != nil {
			return err
		}
		for e := range erasures {
			if e > ropts.Snapshot {
				return report.Refuse("lake", "snapshot %d of %s read Iceberg snapshot %d of table %s, and erasure snapshot %d removed rows from it since, which the lake still holds: a rebuild from the lake would bring erased rows back; erase them in the lake too, then rerun the job's latest snapshot",
					row.Snapshot, j.Name, pin.Snapshot, pin.Table, e)
			}
		}
	}
	in := &source.Iceberg{Job: j, Pin: &pin}
	if j.Input.Iceberg.Read == job.IcebergReadAppends {
		// The batch read the rows appended after the lake snapshot the
		// batch before it reached.
		snaps, err := catalog.ReadSnapshots(ctx, d.SQL(), j.Name, row.Snapshot-1)
		if err != nil {
			return err
		}
		for _, s := range snaps {
			if p, ok := source.ParseIcebergPin(s.Inputs.StreamID); ok && p.Table == pin.Table {
				in.After = &p.Snapshot
			}
		}
	}
	opts := run.RunOptions{BatchID: row.BatchID, Progress: ropts.Progress, Fault: ropts.Fault, SkipAudits: true,
		Partitions: row.Inputs.Partitions, Source: in}
	if j.Pipeline.Mode != pipeline.ModeApply {
		opts.BatchID = ""
	}
	res, err := scratch.Run(ctx, j, opts)
	if err != nil {
		return fmt.Errorf("rerun: replay snapshot %d of %s: %w", row.Snapshot, j.Name, err)
	}
	if res.Decision != report.DecisionApplied && res.Decision != report.DecisionLoaded {
		return fmt.Errorf("rerun: replay of snapshot %d of %s was %s, not a commit", row.Snapshot, j.Name, res.Decision)
	}
	if j.Pipeline.Mode == pipeline.ModeApply && res.Snapshot != row.Snapshot {
		return fmt.Errorf("rerun: replay of snapshot %d of %s committed snapshot %d", row.Snapshot, j.Name, res.Snapshot)
	}
	return nil
}
