package source

import (
	"context"
	"database/sql"

	"github.com/idem-dev/idem/internal/catalog"
	"github.com/idem-dev/idem/internal/job"
	"github.com/idem-dev/idem/internal/report"
)

// An Input is one kind of thing a job reads. A run resolves it before its
// transaction (what the input holds now, with its identity for the job
// key), retains the content-addressed files it names, then stages it inside
// the transaction as the view input the pipeline's steps read.
//
// Files (a path, a glob, a directory listing, optionally in chunks) is the
// only kind today. A new kind (another job's table pinned at a snapshot,
// Kafka or SSE positions) implements these three methods, and the run
// takes it through RunOptions.Source:
//
//   - Resolve returns the input part of the key in Resolved.Digest (for an
//     upstream job the digest of {job, snapshot, job_key}; for a stream the
//     positions per partition it reads up to), and in Resolved.From the
//     position it resumes from, read from the committed state. Files it
//     returns are retained by the run; a kind with no files returns none.
//   - Stage creates the temp view input inside the run's transaction and
//     reports the columns it ignored, or that there is nothing past From.
//   - Kind names it in messages and in the snapshot's inputs.
type Input interface {
	Kind() string
	Resolve(ctx context.Context) (*Resolved, error)
	Stage(ctx context.Context, tx *sql.Tx, r *Resolved) (*Staged, error)
}

// Resolved is what an input holds at the start of a run.
type Resolved struct {
	Files  []InputFile // content-addressed files the run retains before staging
	Format string      // csv, jsonl or parquet
	Digest string      // the input part of the job key
	// Chunk is the slice of the input this run reads, for an input read in
	// chunks; its From is the position the run resumes from. Nil reads the
	// whole input.
	Chunk *Chunk
	// Positions are, for a stream batch, the next position of each
	// partition it read: the run commits them with its rows
	// (idem.positions).
	Positions map[string]int64
	// Rejects are, for a stream batch, the records read as an invalid_*
	// outcome (StreamBatch.Rejects).
	Rejects []catalog.Reject
	// StreamID is the identity of the stream's source (StreamBatch), or
	// the lake snapshot an Iceberg input read (IcebergPin).
	StreamID string
	// BatchID is the batch id an apply run takes when --batch-id does not
	// name one, for an input without files (an Iceberg snapshot).
	BatchID string
}

// Staged is what staging found.
type Staged struct {
	// IgnoredColumns names, as "file: column", the input columns that
	// [input] extra_columns = "ignore" skipped.
	IgnoredColumns []string
	// Empty is true when the input holds nothing past the position it
	// resumes from: the run has nothing to apply.
	Empty bool
}

// Files is the files input: the files of the job's [input] path (a file or
// a glob), or of Path (--input) when set, or the files already listed and
// hashed in Listed (one batch of a files-mode job, the files of a chunked
// job, a rerun's retained copies). With Chunk, a run reads one chunk of
// them.
type Files struct {
	Job      *job.Job
	Path     string
	Listed   []InputFile
	Chunk    *Chunk
	Progress report.Progress
}

// Kind is "files".
func (f *Files) Kind() string { return "files" }

// Resolve lists and hashes the files (unless Listed) and infers their
// format.
func (f *Files) Resolve(ctx context.Context) (*Resolved, error) {
	files := f.Listed
	if files == nil {
		var err error
		done := f.Progress.Start("hash input")
		files, err = ResolveJob(ctx, f.Job, f.Path, f.Progress)
		done()
		if err != nil {
			return nil, err
		}
	}
	format, err := InferFormat(f.Job.Input.Format, files)
	if err != nil {
		return nil, err
	}
	return &Resolved{Files: files, Format: format, Digest: Digest(files), Chunk: f.Chunk}, nil
}

// Stage creates view input over the retained copies and, for a chunk,
// narrows it to the chunk's rows.
func (f *Files) Stage(ctx context.Context, tx *sql.Tx, r *Resolved) (*Staged, error) {
	j := f.Job
	ignored, err := stageInput(ctx, tx, r.Files, r.Format, j.Pipeline.ColumnNames(), j.Input.ExtraColumns == job.ExtraIgnore, false)
	if err != nil {
		return nil, err
	}
	more, err := filterChunk(ctx, tx, j, r.Chunk)
	if err != nil {
		return nil, err
	}
	return &Staged{IgnoredColumns: ignored, Empty: !more}, nil
}
