package ops

import (
	"context"

	"github.com/idem-dev/idem/internal/catalog"
	"github.com/idem-dev/idem/internal/job"
	"github.com/idem-dev/idem/internal/run"
)

// Show returns the release packet of a job's snapshot (0: the latest). A
// snapshot committed without one (a rollback, an erasure, or a commit from
// before packets) gives an error wrapping catalog.ErrNoPacket.
func Show(ctx context.Context, d *run.DB, j *job.Job, snapshot int64) (*catalog.Packet, error) {
	conn, tx, err := d.BeginPinned(ctx)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	defer tx.Rollback()
	s, _, err := catalog.ResolveSnapshot(ctx, tx, j.Name, snapshot)
	if err != nil {
		return nil, err
	}
	return catalog.ReadPacket(ctx, tx, j.Name, s)
}
