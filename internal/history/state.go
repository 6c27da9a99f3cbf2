package history

import (
	"context"
	"errors"
	"fmt"

	"github.com/idem-dev/idem/internal/catalog"
	"github.com/idem-dev/idem/internal/run"
)

// Fence advances the job's writer epoch in its own transaction and returns
// the new epoch. A run given an older epoch is refused from then on.
func Fence(ctx context.Context, d *run.DB, j string) (int64, error) {
	tx, err := d.SQL().BeginTx(ctx, nil)
	if err != nil {
		return 0, fmt.Errorf("fence %s: %w", j, err)
	}
	epoch, err := catalog.AdvanceEpoch(ctx, tx, j)
	if err != nil {
		return 0, errors.Join(err, tx.Rollback())
	}
	if err := tx.Commit(); err != nil {
		return 0, fmt.Errorf("fence %s: %w", j, err)
	}
	_, _ = d.SQL().ExecContext(ctx, "CHECKPOINT")
	return epoch, nil
}

// Log returns the job's runs, newest first. The order is the order the rows
// were written in (idem.runs is append-only, and its rowid follows insertion
// order), not run_at: two runs can share a timestamp, and a wall clock can
// step back.
func Log(ctx context.Context, d *run.DB, j string) ([]catalog.LogEntry, error) {
	if err := d.WriteDeferredLog(ctx); err != nil {
		return nil, err
	}
	return catalog.ReadLog(ctx, d.SQL(), j)
}
