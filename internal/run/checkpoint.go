package run

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/idem-dev/idem/internal/catalog"
	"github.com/idem-dev/idem/internal/job"
	"github.com/idem-dev/idem/internal/pipeline"
	"github.com/idem-dev/idem/internal/source"
	"github.com/idem-dev/idem/internal/sqltext"
)

// FaultCheckpointFiles is the fault point a run (or an erasure or rollback)
// passes once a checkpoint's files are in the store and its rows are
// written, before COMMIT.
const FaultCheckpointFiles = "checkpoint_files"

// Checkpointed says whether the commit of snapshot by job j keeps a
// checkpoint: [retention] checkpoint_every = N is set and N divides the
// snapshot number, whatever kind of snapshot it is (a batch, an erasure, a
// rollback). Every apply job keeps them, whatever it reads (files, or the
// changes of an upstream job): its rerun replays its chain of batches, and
// a checkpoint is where that replay starts, so that neither its own
// retained inputs nor its upstream's history before the checkpoint are
// needed. A refresh job and a model keep none: the rerun of a snapshot is
// one load, from its retained input or from the upstream rows it pinned,
// which the upstream's expiry keeps (history.RerunPins); a checkpoint at that
// snapshot would stand in for the proof instead of shortening it.
func Checkpointed(j *job.Job, snapshot int64) bool {
	n := j.Retention.CheckpointEvery
	return n > 0 && snapshot > 0 && snapshot%n == 0 && CheckpointsKept(j)
}

// CheckpointsKept says whether job j keeps checkpoints at all when it sets
// [retention] checkpoint_every: an apply job that is not a model.
func CheckpointsKept(j *job.Job) bool {
	return j.Pipeline.Mode == pipeline.ModeApply && !j.IsModel()
}

// checkpoint writes the checkpoint of the snapshot this run commits
// (WriteCheckpoint), when the job keeps one.
func (r *txRun) checkpoint(ctx context.Context) (bool, error) {
	done := r.opts.Progress.Start("checkpoint image")
	_, err := WriteCheckpoint(ctx, r.d, r.tx, r.j, r.snapshot, r.opts.Fault)
	done()
	return err == nil, err
}

// WriteCheckpoint keeps, when Checkpointed(j, snapshot), an image of the
// job's state as snapshot commits it, inside the caller's transaction tx
// (which must hold the snapshot's rows already): the target's rows and the
// job's rows of catalog.CheckpointTables as Parquet files, and a manifest,
// all stored in the retained-input store by sha256 and recorded in
// idem.inputs, and the idem.checkpoints row. The files are in the store
// before COMMIT; a transaction that does not commit leaves them to the next
// Sweep. It returns nil when the snapshot keeps no checkpoint.
//
// The outcome rows are not kept: no step reads them, and a replayed run
// counts only its own batch's.
func WriteCheckpoint(ctx context.Context, d *DB, tx *sql.Tx, j *job.Job, snapshot int64, fault func(string)) (*catalog.Checkpoint, error) {
	if !Checkpointed(j, snapshot) {
		return nil, nil
	}
	dir, err := source.StoreTempDir(d.path)
	if err != nil {
		return nil, fmt.Errorf("checkpoint %d of %s: %w", snapshot, j.Name, err)
	}
	defer os.RemoveAll(dir)
	c := &catalog.Checkpoint{Job: j.Name, Snapshot: snapshot}
	tmp := filepath.Join(dir, "target.parquet")
	if _, err := tx.ExecContext(ctx, "COPY (SELECT * FROM "+sqltext.QuoteIdent(j.Table)+") TO "+sqltext.SQLString(tmp)+" (FORMAT parquet)"); err != nil {
		return nil, fmt.Errorf("checkpoint %d of %s: target: %w", snapshot, j.Name, catalog.TrimSQLError(err))
	}
	if err := addCheckpointFile(ctx, d, tx, c, "target", tmp); err != nil {
		return nil, err
	}
	for _, t := range catalog.CheckpointTables {
		tmp := filepath.Join(dir, t+".parquet")
		if err := catalog.CopyIdemRows(ctx, tx, t, j.Name, tmp); err != nil {
			return nil, err
		}
		if err := addCheckpointFile(ctx, d, tx, c, "idem."+t, tmp); err != nil {
			return nil, err
		}
	}
	if err := storeManifest(ctx, d, tx, c, dir); err != nil {
		return nil, err
	}
	if err := catalog.RecordCheckpoint(ctx, tx, *c); err != nil {
		return nil, err
	}
	if fault != nil {
		fault(FaultCheckpointFiles)
	}
	return c, nil
}

// addCheckpointFile stores the file at path as part of checkpoint c and
// records it.
func addCheckpointFile(ctx context.Context, d *DB, tx *sql.Tx, c *catalog.Checkpoint, part, path string) error {
	sum, size, err := source.StoreFile(ctx, d.path, path)
	if err != nil {
		return fmt.Errorf("checkpoint %d of %s: store %s: %w", c.Snapshot, c.Job, part, err)
	}
	if err := catalog.RecordInput(ctx, tx, sum, size); err != nil {
		return fmt.Errorf("checkpoint %d of %s: record %s: %w", c.Snapshot, c.Job, part, err)
	}
	c.Files = append(c.Files, catalog.CheckpointFile{Part: part, SHA256: sum, Bytes: size})
	c.Bytes += size
	return nil
}

// manifestBytes is the size of checkpoint c's manifest as its files
// were before a rewrite: c.Bytes less the files.
func manifestBytes(c *catalog.Checkpoint) int64 {
	n := c.Bytes
	for _, f := range c.Files {
		n -= f.Bytes
	}
	return n
}

// storeManifest writes checkpoint c's manifest into the store, records it
// and sets c's id (its sha256).
func storeManifest(ctx context.Context, d *DB, tx *sql.Tx, c *catalog.Checkpoint, dir string) error {
	data := catalog.CheckpointManifest(c.Job, c.Snapshot, c.Files)
	tmp := filepath.Join(dir, "manifest.json")
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return fmt.Errorf("checkpoint %d of %s: manifest: %w", c.Snapshot, c.Job, err)
	}
	sum, size, err := source.StoreFile(ctx, d.path, tmp)
	if err != nil {
		return fmt.Errorf("checkpoint %d of %s: manifest: %w", c.Snapshot, c.Job, err)
	}
	if err := catalog.RecordInput(ctx, tx, sum, size); err != nil {
		return fmt.Errorf("checkpoint %d of %s: record manifest: %w", c.Snapshot, c.Job, err)
	}
	c.SHA256 = sum
	c.Bytes += size
	return nil
}

// ScrubCheckpoints rewrites, inside an erasure's transaction tx, the
// target file of every checkpoint of job j that holds rows flt drops (the
// erased key's or subject's) without them, stores the new file and a new
// manifest, and points the idem.checkpoints row at them. A checkpoint whose
// target file is gone cannot be scrubbed and is deleted: an erasure is
// never blocked by a checkpoint. It returns the files no checkpoint names
// any more (they held the subject), already forgotten in idem.inputs: the
// caller deletes them after COMMIT.
func ScrubCheckpoints(ctx context.Context, d *DB, tx *sql.Tx, j *job.Job, flt source.RowFilter) ([]string, error) {
	cs, err := catalog.Checkpoints(ctx, tx, j.Name)
	if err != nil || len(cs) == 0 {
		return nil, err
	}
	dir, err := source.StoreTempDir(d.path)
	if err != nil {
		return nil, fmt.Errorf("erase from checkpoints of %s: %w", j.Name, err)
	}
	defer os.RemoveAll(dir)
	// The filter reads no position column: the erasure's position comes
	// from the outcomes, never from a checkpoint.
	rewritten := map[string]*source.RewrittenInput{}
	var maybeStale []string
	for _, c := range cs {
		changed, dropped := false, false
		for i, f := range c.Files {
			if f.Part != "target" {
				continue
			}
			rw, done := rewritten[f.SHA256]
			if !done {
				if _, err := os.Stat(source.RetainedPath(d.path, f.SHA256)); err != nil {
					dropped = true
					break
				}
				rw, _, err = source.Rewrite(ctx, tx, d.path, catalog.InputRef{SHA256: f.SHA256, Bytes: f.Bytes, Name: fmt.Sprintf("checkpoint %d target", c.Snapshot)}, job.FormatParquet, flt)
				if err != nil {
					return nil, err
				}
				rewritten[f.SHA256] = rw
				if rw != nil {
					if err := catalog.RecordInput(ctx, tx, rw.New, rw.Bytes); err != nil {
						return nil, err
					}
					maybeStale = append(maybeStale, rw.Old)
				}
			}
			if rw != nil {
				c.Bytes += rw.Bytes - f.Bytes
				c.Files[i] = catalog.CheckpointFile{Part: f.Part, SHA256: rw.New, Bytes: rw.Bytes}
				changed = true
			}
		}
		if dropped {
			if err := catalog.DeleteCheckpoint(ctx, tx, j.Name, c.Snapshot); err != nil {
				return nil, err
			}
			maybeStale = append(maybeStale, c.SHA256)
			for _, f := range c.Files {
				maybeStale = append(maybeStale, f.SHA256)
			}
			continue
		}
		if !changed {
			continue
		}
		maybeStale = append(maybeStale, c.SHA256)
		c.Bytes -= manifestBytes(c) // storeManifest adds the new one's
		if err := storeManifest(ctx, d, tx, c, dir); err != nil {
			return nil, err
		}
		if err := catalog.ReplaceCheckpoint(ctx, tx, *c); err != nil {
			return nil, err
		}
	}
	var stale []string
	seen := map[string]bool{}
	for _, sum := range maybeStale {
		if seen[sum] {
			continue
		}
		seen[sum] = true
		refs, err := catalog.CheckpointReferences(ctx, tx, sum)
		if err != nil {
			return nil, fmt.Errorf("erase: count references to checkpoint file: %w", err)
		}
		if refs > 0 {
			continue
		}
		if err := catalog.ForgetInput(ctx, tx, sum); err != nil {
			return nil, fmt.Errorf("erase: forget checkpoint file: %w", err)
		}
		stale = append(stale, source.RetainedPath(d.path, sum))
	}
	return stale, nil
}

// LoadCheckpoint loads checkpoint c, taken in database from (its files
// are in from's store, already verified), into the empty scratch database
// d, in one transaction: the target created by job j's schema DDL (j is the
// job as it ran at c.Snapshot) and filled from the target file, the job's
// idem rows, and a history holding the target's rows open from c.Snapshot
// on. A run of the next batch in d then finds what it found in from.
func (d *DB) LoadCheckpoint(ctx context.Context, from string, j *job.Job, c *catalog.Checkpoint) error {
	conn, tx, err := d.BeginPinned(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	defer func() { _ = tx.Rollback() }() // first: an open transaction holds conn, whose Close would wait for it (a panic)
	if err := loadCheckpointTx(ctx, tx, from, j, c); err != nil {
		return errors.Join(err, tx.Rollback())
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("load checkpoint %d of %s: commit: %w", c.Snapshot, j.Name, err)
	}
	_, _ = conn.ExecContext(context.WithoutCancel(ctx), "CHECKPOINT")
	return nil
}

func loadCheckpointTx(ctx context.Context, tx *sql.Tx, from string, j *job.Job, c *catalog.Checkpoint) error {
	if err := ExecStatements(ctx, tx, j.Expand(j.DDL)); err != nil {
		return fmt.Errorf("load checkpoint %d of %s: schema v%d: %w", c.Snapshot, j.Name, j.SchemaVersion, catalog.TrimSQLError(err))
	}
	for _, f := range c.Files {
		path := source.RetainedPath(from, f.SHA256)
		if f.Part == "target" {
			if _, err := tx.ExecContext(ctx, "INSERT INTO "+sqltext.QuoteIdent(j.Table)+" BY NAME SELECT * FROM read_parquet("+sqltext.SQLString(path)+")"); err != nil {
				return fmt.Errorf("load checkpoint %d of %s: target: %w", c.Snapshot, j.Name, catalog.TrimSQLError(err))
			}
			continue
		}
		table, ok := strings.CutPrefix(f.Part, "idem.")
		if !ok {
			return fmt.Errorf("load checkpoint %d of %s: unknown part %q", c.Snapshot, j.Name, f.Part)
		}
		if err := catalog.LoadIdemRows(ctx, tx, table, path); err != nil {
			return fmt.Errorf("load checkpoint %d of %s: %w", c.Snapshot, j.Name, err)
		}
	}
	return catalog.SettleCheckpoint(ctx, tx, j, c.Snapshot)
}
