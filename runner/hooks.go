package runner

import (
	"context"
	"fmt"

	"github.com/idem-dev/idem/internal/job"
	"github.com/idem-dev/idem/internal/report"
	"github.com/idem-dev/idem/internal/run"
)

// Commit is what a call of a Project committed for one job, as an
// AfterCommit hook learns it.
type Commit struct {
	// Job is the job's name; Project.Job describes it.
	Job string
	// Verb is the call: "run", "rollback", "expire", "erase" or
	// "promote".
	Verb string
	// Snapshot is the job's latest snapshot after the call.
	Snapshot int64
	// Committed says the call committed a snapshot of the job, or
	// removed expired ones; false for a run that skipped or found its
	// batch already committed, after which a hook may still catch up
	// what an earlier call left.
	Committed bool
}

// AfterCommit is an extension's hook, called after a call of the Project
// wrote a job's database (Commit says what it wrote), once the database is
// closed: the hook reads what it needs through p, as any Go user would
// (Project.Job for the job's [publish] tables, Project.Export for a
// snapshot's rows, Project.Show for its sha256). An Iceberg publisher
// publishes the new snapshots so. Its error does not undo the commit: the
// call returns its result beside an *AfterCommitError, and the next call
// (or the extension's own verb) catches up.
type AfterCommit func(ctx context.Context, p *Project, c Commit) error

// WithAfterCommit adds h to the hooks called after every commit, in the
// order the options give them.
func WithAfterCommit(h AfterCommit) Option {
	return optionFunc(func(s *settings) error {
		if h == nil {
			return report.Usage("WithAfterCommit: nil hook")
		}
		s.hooks = append(s.hooks, h)
		return nil
	})
}

// WithFaultHook gives crash tests a hook into writes: fault(database) is
// called once per database a call writes, and the func it returns (nil:
// none) at each named point of the write (before_commit, after_commit,
// ...), where a test may kill the process. The points are not a stable
// API.
func WithFaultHook(fault func(database string) func(point string)) Option {
	return optionFunc(func(s *settings) error {
		s.fault = fault
		return nil
	})
}

// The fault points of a database's checkpoint, which WithFaultHook's hook
// hears in order around it: a test that kills the process while DuckDB
// writes the database file starts watching the file at FaultCheckpoint
// (after a commit) or FaultSettle (where commits left in the WAL are
// written into the file, at a close or on an idle follower), and the
// checkpoint returned by FaultAfterCheckpoint and FaultAfterSettle.
const (
	FaultCheckpoint      = run.FaultCheckpoint
	FaultAfterCheckpoint = run.FaultAfterCheckpoint
	FaultSettle          = run.FaultSettle
	FaultAfterSettle     = run.FaultAfterSettle
)

// AfterCommitError is the error of an AfterCommit hook: the commit it
// followed stands (ExitCode 0 for the idem command, which warns).
type AfterCommitError struct {
	Job string
	Err error
}

func (e *AfterCommitError) Error() string {
	return fmt.Sprintf("%s: after commit: %v", e.Job, e.Err)
}

// Unwrap returns the hook's error.
func (e *AfterCommitError) Unwrap() error { return e.Err }

// afterCommit calls the hooks with c; the first error stops them.
func (p *Project) afterCommit(ctx context.Context, c Commit) error {
	for _, h := range p.s.hooks {
		if err := h(ctx, p, c); err != nil {
			return &AfterCommitError{Job: c.Job, Err: err}
		}
	}
	return nil
}

// faultFor is the fault hook of a write of the database at path; nil
// without WithFaultHook.
func (p *Project) faultFor(path string) func(string) {
	if p.s.fault == nil {
		return nil
	}
	return p.s.fault(path)
}

// JobInfo describes a job of a project as its job file says.
type JobInfo struct {
	Name string
	// File is the job file; Database the database file the job uses
	// (WithDatabase's when given).
	File, Database string
	Pipeline       string
	// Mode is the pipeline's mode (ModeApply, ModeRefresh, ...).
	Mode string
	// Target is the table the job writes, Key its key columns and
	// PartitionBy its partition column ("" for none).
	Target      string
	Key         []string
	PartitionBy string
	// Upstream names the jobs it reads, sorted.
	Upstream []string
	// Iceberg is the job's [publish.iceberg], nil without one.
	Iceberg *IcebergTable
	// Reads is what a run of the job reads: ReadsBatch, ReadsFiles,
	// ReadsChunks or ReadsStream.
	Reads string
	// MemoryLimit, Threads and TempDirectory are the DuckDB settings the
	// project's calls open the job's database with: its job file's
	// [duckdb], overridden by WithMemoryLimit, WithThreads and
	// WithTempDirectory (an extension opening the database does as they
	// do).
	MemoryLimit   string
	Threads       int
	TempDirectory string
}

// What a job's run reads (JobInfo.Reads): one batch (a file, a glob, its
// upstream jobs), each new file of a folder ([input] mode = "files"), its
// input chunk after chunk ([input] chunk_rows), or a stream ([input] kind
// = "kafka").
const (
	ReadsBatch  = "batch"
	ReadsFiles  = "files"
	ReadsChunks = "chunks"
	ReadsStream = "stream"
)

// IcebergTable is a job's [publish.iceberg]: the Apache Iceberg table its
// committed snapshots are published to by an extension (idem-iceberg).
type IcebergTable struct {
	// Catalog is the SQL catalog: a postgres:// URL, or a SQLite
	// database's path or sqlite:// URL.
	Catalog string
	// Warehouse is a file:// URL of an absolute path.
	Warehouse string
	Namespace string
}

// Job describes job name of the project.
func (p *Project) Job(name string) (*JobInfo, error) {
	j, err := p.job(name)
	if err != nil {
		return nil, err
	}
	path, oo, err := p.database(j)
	if err != nil {
		return nil, jobError(name, err)
	}
	info := &JobInfo{Name: j.Name, File: j.File, Database: path, Pipeline: j.Pipeline.Name, Mode: j.Pipeline.Mode, Target: j.Table,
		Key: j.Pipeline.Key, PartitionBy: j.PartitionBy, Upstream: j.SortedUpstream(),
		MemoryLimit: oo.DuckDB.MemoryLimit, Threads: oo.DuckDB.Threads, TempDirectory: oo.DuckDB.TempDirectory}
	switch {
	case j.IsStream():
		info.Reads = ReadsStream
	case j.Input.Mode == job.InputModeFiles:
		info.Reads = ReadsFiles
	case j.Input.ChunkRows > 0:
		info.Reads = ReadsChunks
	default:
		info.Reads = ReadsBatch
	}
	if ice := j.Publish.Iceberg; ice != nil {
		info.Iceberg = &IcebergTable{Catalog: ice.Catalog, Warehouse: ice.Warehouse, Namespace: ice.Namespace}
	}
	return info, nil
}
