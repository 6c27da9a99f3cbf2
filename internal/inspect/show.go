package inspect

import (
	"context"
	"errors"

	"github.com/idem-dev/idem/internal/catalog"
	"github.com/idem-dev/idem/internal/job"
	"github.com/idem-dev/idem/internal/report"
	"github.com/idem-dev/idem/internal/run"
)

// Shown is what idem show prints: the release packet of a snapshot, or,
// for an erasure or a rollback, which write no packet, the packet of the
// run snapshot whose rows it holds (an erasure rewrites the packets of the
// snapshots it changed, so that packet describes the rows as they are):
// Requested and RequestedKind then name the snapshot asked for.
type Shown struct {
	*catalog.Packet
	Requested     int64  `json:"requested_snapshot,omitempty"`
	RequestedKind string `json:"requested_kind,omitempty"`
}

// Show returns the release packet of a job's snapshot (0: the latest),
// following an erasure or rollback to the run whose rows it holds, with
// the sha256 and bytes its run left pending computed from those rows
// (completePacket; progress shows that work, a full CSV write of the
// target). A snapshot committed before packets existed gives an error
// wrapping catalog.ErrNoPacket.
func Show(ctx context.Context, d *run.DB, j *job.Job, snapshot int64, progress report.Progress) (*Shown, error) {
	conn, tx, err := d.BeginPinnedProgress(ctx, &progress)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	defer tx.Rollback()
	s, _, err := catalog.ResolveSnapshot(ctx, tx, j.Name, snapshot)
	if err != nil {
		return nil, err
	}
	shown := &Shown{}
	for at := s; ; {
		p, err := catalog.ReadPacket(ctx, tx, j.Name, at)
		if err == nil {
			if err := completePacket(ctx, tx, j, p, progress); err != nil {
				return nil, err
			}
			shown.Packet = p
			if at != s {
				shown.Requested = s
			}
			return shown, nil
		}
		if !errors.Is(err, catalog.ErrNoPacket) {
			return nil, err
		}
		row, rerr := catalog.ReadSnapshot(ctx, tx, j.Name, at)
		if rerr != nil {
			return nil, rerr
		}
		next := at
		switch {
		case row.Kind == report.KindErase:
			next = row.Parent
		case row.Kind == report.KindRollback && row.Inputs.RollbackTo != nil:
			next = *row.Inputs.RollbackTo
		}
		if next <= 0 || next >= at {
			return nil, err
		}
		if shown.RequestedKind == "" {
			shown.RequestedKind = row.Kind
		}
		at = next
	}
}
