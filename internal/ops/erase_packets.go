package ops

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/idem-dev/idem/internal/catalog"
	"github.com/idem-dev/idem/internal/job"
	"github.com/idem-dev/idem/internal/run"
)

// refreshPackets rewrites, inside an erasure's transaction, the release
// packet of every kept snapshot of job j whose rows the erasure changed:
// its entries describe the rows as they are now (read from the history
// the erasure rewrote), its counts are the snapshot row's, and the entries
// it replaced are kept under the erasure (snapshot erasure of j), so that
// `idem show` says which sha256 an erasure replaced and why. It returns
// the snapshots whose packet changed.
func refreshPackets(ctx context.Context, d *run.DB, tx *sql.Tx, j *job.Job, erasure int64) ([]int64, error) {
	snaps, err := catalog.PacketSnapshots(ctx, tx, j.Name)
	if err != nil || len(snaps) == 0 {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "idem-packet-*")
	if err != nil {
		return nil, fmt.Errorf("erase: release packets: %w", err)
	}
	defer os.RemoveAll(dir)
	const rows = "idem_packet_rows"
	var changed []int64
	for _, s := range snaps {
		if s >= erasure {
			continue
		}
		pk, err := catalog.ReadPacket(ctx, tx, j.Name, s)
		if err != nil {
			return nil, err
		}
		row, err := catalog.ReadSnapshot(ctx, tx, j.Name, s)
		if err != nil {
			return nil, err
		}
		pinned, err := catalog.PinnedSelect(ctx, tx, j.Name, row.Columns, s)
		if err != nil {
			return nil, err
		}
		if _, err := tx.ExecContext(ctx, "CREATE OR REPLACE TEMP TABLE "+rows+" AS "+pinned); err != nil {
			return nil, fmt.Errorf("erase: release packet of snapshot %d of %s: %w", s, j.Name, catalog.TrimSQLError(err))
		}
		at := *j
		at.PartitionBy = pk.PartitionBy
		entries := make([]catalog.PacketEntry, len(pk.Entries))
		var replaced []catalog.PacketEntry
		for i, old := range pk.Entries {
			e, err := run.PacketEntryOf(ctx, tx, &at, rows, row.Columns, old.Partition, filepath.Join(dir, fmt.Sprintf("%d-%d.csv", s, i)))
			if err != nil {
				return nil, err
			}
			e.Whole, e.Repaired = old.Whole, old.Repaired
			entries[i] = *e
			if e.SHA256 != old.SHA256 {
				replaced = append(replaced, old)
			}
		}
		if len(replaced) == 0 {
			continue
		}
		pk.Entries = entries
		pk.Erasures = append(pk.Erasures, catalog.PacketErasure{Snapshot: erasure, Replaced: replaced})
		if pk.RowsIn, pk.Outcomes, err = snapshotCounts(ctx, tx, j.Name, s); err != nil {
			return nil, err
		}
		if err := catalog.ReplacePacket(ctx, tx, pk); err != nil {
			return nil, err
		}
		changed = append(changed, s)
	}
	_, err = tx.ExecContext(ctx, "DROP TABLE IF EXISTS "+rows)
	return changed, err
}

// snapshotCounts are the rows in and outcomes snapshot s of job name
// records.
func snapshotCounts(ctx context.Context, q catalog.Querier, name string, s int64) (int64, map[string]int64, error) {
	in, text, err := catalog.SnapshotCounts(ctx, q, name, s)
	if err != nil {
		return 0, nil, err
	}
	out := map[string]int64{}
	if err := json.Unmarshal([]byte(text), &out); err != nil {
		return 0, nil, fmt.Errorf("outcomes of snapshot %d of %s: %w", s, name, err)
	}
	return in, out, nil
}
