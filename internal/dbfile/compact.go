package dbfile

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/idem-dev/idem/internal/catalog"
	"github.com/idem-dev/idem/internal/export"
	"github.com/idem-dev/idem/internal/job"
	"github.com/idem-dev/idem/internal/report"
	"github.com/idem-dev/idem/internal/run"
)

// CompactOptions say how idem compact runs.
type CompactOptions struct {
	// Open are the settings the database was opened with; compact reopens
	// the new file with them to republish the read replica.
	Open run.OpenOptions
	// Fault, when set, is called at each fault point (run.FaultCompact*)
	// for kill tests.
	Fault func(point string)
}

// CompactResult reports a compact.
type CompactResult struct {
	Database    string `json:"database"`
	BytesBefore int64  `json:"bytes_before"`
	BytesAfter  int64  `json:"bytes_after"`
	// Commit is the database's latest commit sequence (idem.commits),
	// the same before and after.
	Commit int64 `json:"commit"`
	// Tables is the number of tables checked row for row.
	Tables int `json:"tables"`
	// Jobs are the latest exports checked, one per job.
	Jobs    []CompactedJob   `json:"jobs"`
	Seconds float64          `json:"seconds"`
	Replica *run.ReplicaInfo `json:"replica,omitempty"`
}

// CompactedJob is the latest snapshot of one job, exported (canonical CSV)
// from the database and from its compacted file with the same sha256.
type CompactedJob struct {
	Job      string `json:"job"`
	Table    string `json:"table"`
	Snapshot int64  `json:"snapshot"`
	Rows     int64  `json:"rows"`
	SHA256   string `json:"sha256"`
}

// Compact rewrites the database file d (open for writing, so that no other
// writer changes it meanwhile) so that the space of deleted, expired and
// erased rows goes back to the file system and no byte of an erased row
// survives in free blocks. It checkpoints, writes a new file with COPY
// FROM DATABASE in a scratch folder beside the database, checks that the
// new file holds the same objects and the same rows in every table and
// that every job's latest export has the same sha256, then swaps it in
// (run.DB.SwapIn) and republishes the read replica if there is one. d is
// closed when Compact returns, whatever happened. A failure before the
// swap leaves the database as it was; the scratch folder of a killed
// compact is removed by the next writer.
func Compact(ctx context.Context, d *run.DB, opts CompactOptions) (_ *CompactResult, err error) {
	defer func() { err = errors.Join(err, d.Close()) }()
	if d.ReadOnly() {
		return nil, fmt.Errorf("compact %s: the database is open read-only", d.Path())
	}
	fault := func(point string) {
		if opts.Fault != nil {
			opts.Fault(point)
		}
	}
	start := time.Now()
	res := &CompactResult{Database: d.Path()}
	scratch, release, err := run.NewScratchDir(d.Path())
	if err != nil {
		return nil, err
	}
	defer release()
	if err := d.Checkpoint(ctx); err != nil {
		return nil, err
	}
	st, err := os.Stat(d.Path())
	if err != nil {
		return nil, fmt.Errorf("compact %s: %w", d.Path(), err)
	}
	res.BytesBefore = st.Size()
	if _, res.Commit, err = catalog.CommitPoint(ctx, d.SQL()); err != nil {
		return nil, err
	}
	want, exports, err := compactCheck(ctx, d, filepath.Join(scratch, "old"))
	if err != nil {
		return nil, fmt.Errorf("compact %s: read the database: %w", d.Path(), err)
	}
	newPath := filepath.Join(scratch, filepath.Base(d.Path()))
	if err := d.RewriteTo(ctx, newPath); err != nil {
		return nil, err
	}
	fault(run.FaultCompactWritten)
	nd, err := run.Open(ctx, newPath, run.OpenOptions{ReadOnly: true, DuckDB: opts.Open.DuckDB, Journal: run.JournalSkip})
	if err != nil {
		return nil, fmt.Errorf("compact %s: open the new file: %w", d.Path(), err)
	}
	got, gotExports, err := compactCheck(ctx, nd, filepath.Join(scratch, "new"))
	err = errors.Join(err, nd.Close())
	if err != nil {
		return nil, fmt.Errorf("compact %s: read the new file: %w", d.Path(), err)
	}
	if diff := want.Diff(got); diff != "" {
		return nil, report.Fatal(fmt.Errorf("compact %s: the new file does not hold what the database holds (%s); nothing was changed", d.Path(), diff))
	}
	for i, e := range exports {
		if g := gotExports[i]; g != e {
			return nil, report.Fatal(fmt.Errorf("compact %s: job %s exports sha256 %s from the new file, %s from the database; nothing was changed", d.Path(), e.Job, g.SHA256, e.SHA256))
		}
	}
	res.Tables, res.Jobs = len(want.Tables), exports
	fault(run.FaultCompactVerified)
	if err := d.SwapIn(newPath, filepath.Join(scratch, "old.duckdb"), opts.Fault); err != nil {
		return nil, err
	}
	if st, err := os.Stat(d.Path()); err == nil {
		res.BytesAfter = st.Size()
	}
	res.Replica = republishReplica(ctx, d.Path(), opts.Open)
	res.Seconds = time.Since(start).Seconds()
	return res, nil
}

// compactCheck reads what compact compares: the digest of every table and
// object, and each job's latest export (canonical CSV, written under dir
// and removed).
func compactCheck(ctx context.Context, d *run.DB, dir string) (*catalog.DatabaseDigest, []CompactedJob, error) {
	digest, err := catalog.Digest(ctx, d.SQL())
	if err != nil {
		return nil, nil, err
	}
	jobs, err := catalog.JobTargets(ctx, d.SQL())
	if err != nil {
		return nil, nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, nil, err
	}
	defer os.RemoveAll(dir)
	out := make([]CompactedJob, 0, len(jobs))
	for i, jt := range jobs {
		j := &job.Job{Name: jt[0], Table: jt[1]}
		res, err := export.Export(ctx, d, j, export.Options{Out: filepath.Join(dir, fmt.Sprintf("%d.csv", i)), Format: job.FormatCSV})
		if err != nil {
			return nil, nil, fmt.Errorf("export %s: %w", j.Name, err)
		}
		out = append(out, CompactedJob{Job: j.Name, Table: res.Table, Snapshot: res.Snapshot, Rows: res.Rows, SHA256: res.SHA256})
		_ = os.Remove(res.Path)
	}
	return digest, out, nil
}

// republishReplica publishes the read replica of the compacted database
// at path again when one is in place, from the new file. It returns nil
// when there is none. A writer that took the database first leaves the
// replica in place: it holds the same commit.
func republishReplica(ctx context.Context, path string, opts run.OpenOptions) *run.ReplicaInfo {
	if _, err := os.Stat(run.ReplicaPath(path)); err != nil {
		return nil
	}
	opts.DuckDB.ReadReplica, opts.ReadOnly, opts.Wait = true, false, 0
	d, err := run.Open(ctx, path, opts)
	if err != nil {
		return &run.ReplicaInfo{Path: run.ReplicaPath(path), Error: err.Error()}
	}
	info := d.PublishReplica(ctx, nil)
	// The database was opened for writing: a close that fails may not
	// have checkpointed it, so the publication is reported as failed.
	if err := d.Close(); err != nil && info != nil && info.Error == "" {
		info.Error = fmt.Sprintf("close database %s: %v", path, err)
	}
	return info
}
