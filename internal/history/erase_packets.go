package history

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
//
// A partition's entry is hashed again and compared. A whole target's
// entry is not: it gets the row count and bounds of the rows as they are
// now and its sha256 (and distinct keys) are left pending, computed when
// asked from the scrubbed rows, so no stored sha256 covers an erased row
// and an erasure does not write every kept snapshot out. Its rows changed
// when their count did (an erasure only removes rows) or when changed[s]
// says so (a recomputed model, whose values can change while its count
// does not; nil for a job erased from).
func refreshPackets(ctx context.Context, d *run.DB, tx *sql.Tx, j *job.Job, erasure int64, changed map[int64]bool) ([]int64, error) {
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
	var out []int64
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
		at := *j
		at.PartitionBy = pk.PartitionBy
		entries := make([]catalog.PacketEntry, len(pk.Entries))
		var replaced []catalog.PacketEntry
		copied := false
		for i, old := range pk.Entries {
			if old.Whole {
				e, err := run.PacketFactsOf(ctx, tx, &at, "("+pinned+")", row.Columns, nil, false)
				if err != nil {
					return nil, err
				}
				e.Whole = true
				entries[i] = old
				if changed[s] || e.Rows != old.Rows {
					entries[i] = *e
					replaced = append(replaced, replacedEntry(old))
				}
				continue
			}
			if !copied {
				if _, err := tx.ExecContext(ctx, "CREATE OR REPLACE TEMP TABLE "+rows+" AS "+pinned); err != nil {
					return nil, fmt.Errorf("erase: release packet of snapshot %d of %s: %w", s, j.Name, catalog.TrimSQLError(err))
				}
				copied = true
			}
			e, err := run.PacketEntryOf(ctx, tx, &at, rows, row.Columns, old.Partition, filepath.Join(dir, fmt.Sprintf("%d-%d.csv", s, i)))
			if err != nil {
				return nil, err
			}
			e.Repaired = old.Repaired
			entries[i] = *e
			if e.SHA256 != old.SHA256 {
				replaced = append(replaced, replacedEntry(old))
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
		out = append(out, s)
	}
	_, err = tx.ExecContext(ctx, "DROP TABLE IF EXISTS "+rows)
	return out, err
}

// replacedEntry is what a packet keeps of an entry an erasure replaced:
// its sha256 and counts, not its bounds, which may be the erased
// subject's values (the lowest or highest key of the rows it held).
func replacedEntry(old catalog.PacketEntry) catalog.PacketEntry {
	old.Bounds = nil
	return old
}

// snapshotCounts are the rows in and outcomes snapshot s of job name
// records.
func snapshotCounts(ctx context.Context, q catalog.Querier, name string, s int64) (int64, map[string]int64, error) {
	c, err := catalog.ReadSnapshotCounts(ctx, q, name, s)
	if err != nil {
		return 0, nil, err
	}
	out := map[string]int64{}
	if err := json.Unmarshal([]byte(c.Outcomes), &out); err != nil {
		return 0, nil, fmt.Errorf("outcomes of snapshot %d of %s: %w", s, name, err)
	}
	return c.RowsIn, out, nil
}
