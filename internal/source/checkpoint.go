package source

import (
	"context"
	"os"
	"path/filepath"

	"github.com/idem-dev/idem/internal/catalog"
	"github.com/idem-dev/idem/internal/pipeline"
	"github.com/idem-dev/idem/internal/report"
)

// StoreTempDir makes a temporary folder inside the retained-input store of
// database dbPath for files about to be stored (a checkpoint's): a killed
// process leaves it, and the next Sweep removes it with its files.
func StoreTempDir(dbPath string) (string, error) {
	dir := StoreDir(dbPath)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	return os.MkdirTemp(dir, tempPrefix+"checkpoint-*")
}

// StoreFile moves the file at path into the retained-input store under its
// sha256, synced, and returns its sha256 and size. A copy already stored
// with those bytes is kept and path removed. The caller records it
// (catalog.RecordInput) in the transaction that commits whatever names it;
// until then Sweep may remove it.
func StoreFile(ctx context.Context, dbPath, path string) (string, int64, error) {
	sum, size, err := SumFile(ctx, path, nil)
	if err != nil {
		return "", 0, err
	}
	dst := RetainedPath(dbPath, sum)
	if st, err := os.Stat(dst); err == nil && st.Mode().IsRegular() && st.Size() == size {
		if have, _, err := SumFile(ctx, dst, nil); err == nil && have == sum {
			_ = os.Remove(path)
			return sum, size, nil
		}
	}
	if err := syncFile(path); err != nil {
		return "", 0, err
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return "", 0, err
	}
	if err := os.Rename(path, dst); err != nil {
		return "", 0, err
	}
	return sum, size, nil
}

// VerifyCheckpoint checks every file of checkpoint c in the store of
// database dbPath against its recorded sha256, and its manifest against the
// checkpoint's id. A missing or changed file is refused (ErrRefused) naming
// the file: nothing is read from a checkpoint that is not the one recorded.
func VerifyCheckpoint(ctx context.Context, dbPath string, c *catalog.Checkpoint) error {
	manifest := catalog.CheckpointManifest(c.Job, c.Snapshot, c.Files)
	if got := pipeline.DigestString(string(manifest)); got != c.SHA256 {
		return report.Refuse("checkpoint", "checkpoint %d of %s: its recorded files have manifest sha256 %s, recorded %s", c.Snapshot, c.Job, report.Short(got), report.Short(c.SHA256))
	}
	files := append([]catalog.CheckpointFile{{Part: "manifest", SHA256: c.SHA256, Bytes: int64(len(manifest))}}, c.Files...)
	for _, f := range files {
		p := RetainedPath(dbPath, f.SHA256)
		sum, _, err := SumFile(ctx, p, nil)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return report.Refuse("checkpoint", "checkpoint %d of %s: file %s (%s) cannot be read: %v; rerun --from-start replays every batch instead", c.Snapshot, c.Job, p, f.Part, err)
		}
		if sum != f.SHA256 {
			return report.Refuse("checkpoint", "checkpoint %d of %s: file %s (%s) was changed: its sha256 is %s, recorded %s; rerun --from-start replays every batch instead", c.Snapshot, c.Job, p, f.Part, report.Short(sum), report.Short(f.SHA256))
		}
	}
	return nil
}
