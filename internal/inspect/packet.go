package inspect

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/idem-dev/idem/internal/catalog"
	"github.com/idem-dev/idem/internal/export"
	"github.com/idem-dev/idem/internal/job"
	"github.com/idem-dev/idem/internal/report"
	"github.com/idem-dev/idem/internal/run"
)

// Packet returns the release packet of job j's snapshot s as idem show
// prints it: every entry's distinct keys, sha256 and bytes filled in, the
// pending ones (catalog.PacketEntry.Pending) computed from the snapshot's
// rows. It
// reads in one transaction, so the rows hashed are those of the commit the
// packet was read from. A snapshot without a packet gives an error
// wrapping catalog.ErrNoPacket.
func Packet(ctx context.Context, d *run.DB, j *job.Job, s int64, progress report.Progress) (*catalog.Packet, error) {
	conn, tx, err := d.BeginPinnedProgress(ctx, &progress)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	defer tx.Rollback()
	p, err := catalog.ReadPacket(ctx, tx, j.Name, s)
	if err != nil {
		return nil, err
	}
	if err := completePacket(ctx, tx, j, p, progress); err != nil {
		return nil, err
	}
	return p, nil
}

// completePacket computes the distinct keys, sha256 and bytes of p's
// pending entries through q, a read transaction, from the rows of p's
// snapshot as they are now (after any erasure): the sha256 and bytes are
// those of the rows written as `idem export JOB --snapshot S --format
// csv` writes them, into a temporary file that is removed. It stores
// nothing: a reader holds no writer lock, and a stored value would be one
// more copy for an erasure to keep right.
func completePacket(ctx context.Context, q catalog.Querier, j *job.Job, p *catalog.Packet, progress report.Progress) error {
	var pending []int
	for i := range p.Entries {
		if p.Entries[i].Pending() {
			pending = append(pending, i)
		}
	}
	if len(pending) == 0 {
		return nil
	}
	done := progress.Start("packet sha256")
	defer done()
	src, err := export.PinnedSource(ctx, q, j, j.Table, p.Snapshot)
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "idem-packet-*")
	if err != nil {
		return fmt.Errorf("release packet of snapshot %d of %s: %w", p.Snapshot, j.Name, err)
	}
	defer os.RemoveAll(dir)
	for _, i := range pending {
		e := &p.Entries[i]
		if !e.Whole {
			// Only a whole target's entry is ever left pending.
			return fmt.Errorf("release packet of snapshot %d of %s: entry %d has no sha256", p.Snapshot, j.Name, i)
		}
		facts, err := run.PacketFactsOf(ctx, q, j, "("+src.Query+")", src.TargetColumns(), nil, true)
		if err != nil {
			return err
		}
		if facts.Rows != e.Rows {
			return fmt.Errorf("release packet of snapshot %d of %s: it counts %d rows, the snapshot holds %d", p.Snapshot, j.Name, e.Rows, facts.Rows)
		}
		e.DistinctKeys = facts.DistinctKeys
		out := filepath.Join(dir, "whole.csv")
		rows, sum, size, err := export.CopyTo(ctx, q, src.Ordered(), out, job.FormatCSV, "packet sha256", progress, nil)
		if err != nil {
			return fmt.Errorf("release packet of snapshot %d of %s: %w", p.Snapshot, j.Name, err)
		}
		if rows != e.Rows {
			return fmt.Errorf("release packet of snapshot %d of %s: it counts %d rows, the snapshot holds %d", p.Snapshot, j.Name, e.Rows, rows)
		}
		e.SHA256, e.Bytes = sum, size
	}
	return nil
}
