package runner

import (
	"encoding/json"

	"github.com/idem-dev/idem/internal/export"
	"github.com/idem-dev/idem/internal/history"
	"github.com/idem-dev/idem/internal/job"
	"github.com/idem-dev/idem/internal/planner"
	"github.com/idem-dev/idem/internal/report"
	"github.com/idem-dev/idem/internal/run"
)

// Batch names the one batch a run of an apply job applies, and guards it;
// the zero Batch runs the job as its job file says. The fields are the
// idem run flags of the same names.
type Batch struct {
	// Input overrides the job's [input] path (a file or a glob).
	Input string
	// ID is the batch id; "" names the batch after its input file.
	ID string
	// From and To, given together, say the batch covers source positions
	// (From, To]; From must equal the job's cursor.
	From, To *int64
	// Epoch, when set, refuses the run unless it is the job's current
	// writer epoch; a job with [job] fencing = "required" needs it.
	Epoch *int64
	// ExpectParent, when set, refuses the run unless the job's latest
	// snapshot is this one.
	ExpectParent *int64
	// Partitions are the partitions a run of a job with [target]
	// partition_by replaces; nil: those its input holds.
	Partitions []string
	// FullRefresh rebuilds a refresh job, a model or a seed from its
	// inputs as a new snapshot even when its key is unchanged, and an
	// incremental model whole (idem run --full-refresh); any other apply
	// job is refused (ErrUsage): its target is the fold of its batches.
	FullRefresh bool
}

// options checks b and returns the run's options.
func (b Batch) options() (run.RunOptions, error) {
	if (b.From == nil) != (b.To == nil) {
		return run.RunOptions{}, report.Usage("Batch: From and To go together")
	}
	return run.RunOptions{Input: b.Input, BatchID: b.ID, From: b.From, To: b.To, Epoch: b.Epoch,
		ExpectParent: b.ExpectParent, Partitions: b.Partitions, FullRefresh: b.FullRefresh, Expire: history.ExpireAfterRun}, nil
}

// The decisions of a Result or a Plan. A run reports loaded (a refresh
// job reloaded its target), applied (an apply job applied a batch),
// skipped (nothing changed: nothing written) or already_committed (the
// same batch was applied before: nothing written). A job of a project may
// also have failed, been refused, or been blocked: not run because a job it
// reads did not commit.
const (
	DecisionLoaded           Decision = "loaded"
	DecisionApplied          Decision = "applied"
	DecisionSkipped          Decision = "skipped"
	DecisionAlreadyCommitted Decision = "already_committed"
	DecisionFailed           Decision = "failed"
	DecisionRefused          Decision = "refused"
	DecisionBlocked          Decision = "blocked"
)

// Decision is what a run did, or a plan says it would do: one of the
// Decision constants. Its JSON is the string, as idem run --json prints it.
type Decision string

// Committed says the decision committed a snapshot: loaded or applied.
func (d Decision) Committed() bool { return d == DecisionLoaded || d == DecisionApplied }

// Result is what one run of a job did. The JSON keys are those of idem run
// --json, in its order. A job that applies several batches in one run (an
// [input] mode = "files" or chunk_rows job, a stream job followed with
// WithStream) has one Result per committed batch in Runs, and its other
// fields but Job, Decision and NewFiles (a followed stream's Snapshot and
// JobKey too) are zero.
type Result struct {
	Job string `json:"job"`
	// Pipeline is the job's pipeline, Mode its mode (apply, refresh,
	// select).
	Pipeline string `json:"pipeline"`
	Mode     string `json:"mode"`
	// Decision is loaded, applied, skipped or already_committed; in a
	// project also failed, refused or blocked.
	Decision Decision `json:"decision"`
	// Changed lists the key parts that changed (input, transform, config,
	// schema); FirstLoad is true for the job's first commit.
	Changed   []string `json:"changed"`
	FirstLoad bool     `json:"first_load"`
	JobKey    string   `json:"job_key"`
	// Snapshot is the job's snapshot after the run (the new one when it
	// committed), Parent the one before.
	Snapshot int64  `json:"snapshot"`
	Parent   int64  `json:"parent"`
	BatchID  string `json:"batch_id,omitempty"`
	// SHA256 is the sha256 of the snapshot the run committed, written as
	// its canonical export (csv, key order): the sha256 idem export
	// --format csv and Project.Export give for it and Project.Rerun
	// compares its rebuild with. It is computed after the commit by
	// reading the snapshot back (a full read of the target); "" when the
	// run committed nothing (skipped, already_committed), and for the
	// summary of a files-mode or chunked job, whose Runs carry theirs.
	SHA256 string `json:"sha256,omitempty"`
	// RowsIn counts the input rows; Outcomes counts them by outcome.
	// RowsOut is the target's row count after the run, RowsWritten what
	// this run wrote to it.
	RowsIn      int64            `json:"rows_in"`
	RowsOut     int64            `json:"rows_out"`
	Outcomes    map[string]int64 `json:"outcomes"`
	Cursor      int64            `json:"cursor"`
	Epoch       int64            `json:"epoch"`
	Target      string           `json:"target"`
	InputSHA256 string           `json:"input_sha256"`
	// Inputs are the input files the run read.
	Inputs []InputFile `json:"inputs"`
	// Parts are the job key's parts (input, upstream, transform, config,
	// schema), canonical JSON.
	Parts json.RawMessage `json:"parts"`
	// IgnoredColumns names, as "file: column", the input columns that
	// [input] extra_columns = "ignore" skipped.
	IgnoredColumns []string `json:"ignored_columns,omitempty"`
	// Audits are the results of the job's [[audit]] checks.
	Audits []AuditCheck `json:"audits,omitempty"`
	// Note says what the run did beyond its batch (it took an upstream's
	// rows over the job's newer ones after the upstream rolled back).
	Note        string `json:"note,omitempty"`
	RowsWritten int64  `json:"rows_written"`
	// Upstream lists the upstream jobs the run pinned, with the snapshot
	// the job had pinned before.
	Upstream []UpstreamChange `json:"upstream,omitempty"`
	// Conflicts is the number of conflict rows the target holds, for a
	// pipeline that keeps conflicts in its target; nil otherwise.
	Conflicts *int64 `json:"conflicts"`
	// Replica reports the read replica published after the commit.
	Replica *ReplicaInfo `json:"replica,omitempty"`
	// Partitions are the partitions a partitioned job's run replaced, and
	// Repaired the others it removed a moved key from.
	Partitions []string `json:"partitions,omitempty"`
	Repaired   []string `json:"repaired_partitions,omitempty"`
	// Incremental, for an incremental model, is partition, key or full
	// (with IncrementalNote saying why); Keys the keys recomputed.
	Incremental     string `json:"incremental,omitempty"`
	IncrementalNote string `json:"incremental_note,omitempty"`
	Keys            int64  `json:"keys,omitempty"`
	// Expiry reports the expiry of old snapshots that followed the run
	// ([retention] keep_snapshots).
	Expiry *Expiry `json:"expiry,omitempty"`
	// FullRefresh says the run rebuilt the target whole, whatever its key
	// (Batch.FullRefresh, WithFullRefresh).
	FullRefresh bool `json:"full_refresh,omitempty"`
	// Watermark is a chunked job's watermark after the run (nil: none
	// yet).
	Watermark *int64 `json:"watermark,omitempty"`
	// NewFiles and Runs: a files-mode job's new files and the batches it
	// committed, one per file (or one for all); Runs also holds a chunked
	// job's chunks.
	NewFiles []string  `json:"new_files,omitempty"`
	Runs     []*Result `json:"runs,omitempty"`
	// BlockedBy names, for a blocked job of a project, the jobs it reads
	// that did not commit.
	BlockedBy []string `json:"blocked_by,omitempty"`
	// Error and ExitCode are set for a job of a project that failed or was
	// refused, as its *JobError says.
	Error    string `json:"error,omitempty"`
	ExitCode int    `json:"exit_code,omitempty"`

	err error // the error Error says
}

// How an incremental model's run recomputed it (Result.Incremental):
// the partitions, or the keys, whose upstream rows changed.
const (
	IncrementalPartition = job.IncrementalPartition
	IncrementalKey       = job.IncrementalKey
)

// InputFile is an input file a run read: its path, sha256 and size.
type InputFile struct {
	Path   string `json:"path"`
	SHA256 string `json:"sha256"`
	Bytes  int64  `json:"bytes"`
}

// AuditCheck is the result of one [[audit]] check of a run: the rows that
// violate it (at most a few, as text).
type AuditCheck struct {
	Name       string   `json:"name"`
	Kind       string   `json:"kind"`
	Severity   string   `json:"severity"`
	Violations int64    `json:"violations"`
	Rows       []string `json:"rows"`
}

// UpstreamChange is an upstream job a run pinned: the snapshot the job had
// pinned before (nil: none) and the one it read.
type UpstreamChange struct {
	Job  string `json:"job"`
	From *int64 `json:"from"`
	To   int64  `json:"to"`
}

// String reads "trips 4 → 5", "trips 5" when it did not move, or "trips
// 5 (first pinned)", as the idem command prints it.
func (c UpstreamChange) String() string { return run.UpstreamChange(c).String() }

// Expiry reports the expiry of old snapshots that followed a run.
type Expiry struct {
	// OldestKept is the job's oldest readable snapshot after it; Expired
	// counts the snapshots it expired.
	OldestKept int64 `json:"oldest_kept"`
	Expired    int64 `json:"expired"`
	// Error says why it failed; the run's commit stands and the next run
	// or Expire retries.
	Error string `json:"error,omitempty"`
}

// resultOf is the public copy of r.
func resultOf(r *run.Result) (*Result, error) {
	var out Result
	if err := convert(r, &out); err != nil {
		return nil, err
	}
	out.Changed = report.NonNil(out.Changed)
	return &out, nil
}

// resultsOf is resultOf of each of rs.
func resultsOf(rs []*run.Result) ([]*Result, error) {
	out := make([]*Result, len(rs))
	for i, r := range rs {
		var err error
		if out[i], err = resultOf(r); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// Plan is what a run of a job would decide, computed without writing. The
// JSON keys are those of idem plan --json.
type Plan struct {
	Job  string `json:"job"`
	Mode string `json:"mode"`
	// Decision is in the run's words: loaded, applied, skipped,
	// already_committed or refused; in a project also failed or blocked.
	Decision  Decision `json:"decision"`
	Changed   []string `json:"changed"`
	FirstLoad bool     `json:"first_load"`
	// JobKey is the key the run would record; "" while an upstream has
	// not committed what the job would read.
	JobKey   string `json:"job_key"`
	BatchID  string `json:"batch_id,omitempty"`
	Snapshot int64  `json:"snapshot"`
	Cursor   int64  `json:"cursor"`
	Epoch    int64  `json:"epoch"`
	// Reason says why: the refusal, a skip's cause, an upstream that
	// would commit first.
	Reason   string   `json:"reason,omitempty"`
	NewFiles []string `json:"new_files,omitempty"`
	// Parts are the job key's parts the run would record, canonical JSON;
	// Upstream the upstream jobs it would pin.
	Parts    json.RawMessage  `json:"parts"`
	Upstream []UpstreamChange `json:"upstream,omitempty"`
	// ModelChange classifies a change of a model's SQL or columns against
	// its latest snapshot.
	ModelChange *ModelChange `json:"model_change,omitempty"`
	// BlockedBy, Error and ExitCode as in Result.
	BlockedBy []string `json:"blocked_by,omitempty"`
	Error     string   `json:"error,omitempty"`
	ExitCode  int      `json:"exit_code,omitempty"`
}

// ModelChange classifies a change of a model against its latest
// snapshot: its class and why, the columns added, removed and retyped,
// and, when both SQL texts ran on the same upstream rows (RowsCompared),
// the keys whose rows differ in the columns both have; Downstream names
// the project's jobs that read it, which the change rebuilds.
type ModelChange struct {
	Class          string         `json:"class"`
	ColumnsAdded   []string       `json:"columns_added"`
	ColumnsRemoved []string       `json:"columns_removed"`
	ColumnsRetyped []ColumnChange `json:"columns_retyped"`
	RowsCompared   bool           `json:"rows_compared"`
	RowsChanged    int64          `json:"rows_changed"`
	Reason         string         `json:"reason"`
	Downstream     []string       `json:"downstream"`
}

func planOf(p *planner.Plan) (*Plan, error) {
	var out Plan
	if err := convert(p, &out); err != nil {
		return nil, err
	}
	out.Changed = report.NonNil(out.Changed)
	return &out, nil
}

// RerunResult reports a rerun: the sha256 of the canonical export (csv, key
// order) of the snapshot as stored and of its rebuild. The JSON keys are
// those of idem rerun --json.
type RerunResult struct {
	Job        string `json:"job"`
	Reproduced bool   `json:"reproduced"`
	Snapshot   int64  `json:"snapshot"`
	SHA256     string `json:"sha256"`
	Rebuilt    string `json:"rebuilt_sha256"`
	Rows       int64  `json:"rows"`
	// Replayed counts the snapshots replayed in the scratch database,
	// from the checkpoint FromCheckpoint (0: from the first snapshot).
	Replayed       int   `json:"replayed"`
	FromCheckpoint int64 `json:"from_checkpoint"`
	// Diff, for a snapshot not reproduced, compares the stored rows (from)
	// with the rebuilt ones (to), with the first changed rows column by
	// column; RebuiltPath is the file beside the database that keeps the
	// rebuilt rows (idem erase removes it).
	Diff        *DiffResult `json:"diff,omitempty"`
	RebuiltPath string      `json:"rebuilt_path,omitempty"`
	// Upstream holds, with RerunOptions.Deep, the reruns of the upstream
	// snapshots the rebuilt one pinned, each with its own; RerunAbove
	// says this (job, snapshot) was rebuilt by an earlier branch of the
	// same rerun, whose verdict it carries (its upstreams are listed
	// there).
	Upstream   []*RerunResult `json:"upstream,omitempty"`
	RerunAbove bool           `json:"rerun_above,omitempty"`
	// UnsignedZero says the snapshot, committed on DuckDB 1.5, was
	// reproduced with each -0.0 of a DOUBLE or REAL column written 0.0,
	// as DuckDB 1.5 wrote it; ErasedBy names the erasures that rewrote
	// the snapshot's rows after it was committed (the sha256 compared is
	// that of its rows since).
	UnsignedZero bool    `json:"unsigned_zero,omitempty"`
	ErasedBy     []int64 `json:"erased_by,omitempty"`
}

// AllReproduced says the rerun and every upstream rerun under it
// reproduced their snapshots.
func (r *RerunResult) AllReproduced() bool {
	if !r.Reproduced {
		return false
	}
	for _, u := range r.Upstream {
		if !u.AllReproduced() {
			return false
		}
	}
	return true
}

// RerunOptions say what Project.RerunWith rebuilds.
type RerunOptions struct {
	// Snapshot is the snapshot to rebuild; 0 the latest.
	Snapshot int64
	// Deep also reruns each upstream snapshot the rebuilt one pinned from
	// its own retained inputs, down the chain, each (job, snapshot) once;
	// an upstream's job file is looked for among the project's jobs, then
	// beside the job's file (same database).
	Deep bool
	// FromStart replays every snapshot from the first, not from the
	// nearest checkpoint.
	FromStart bool
}

// ExportOptions say what Project.Export writes.
type ExportOptions struct {
	// Out is the file to write (required), or with PartitionBy the folder.
	Out string
	// Table is the job's target (default) or <target>_outcomes.
	Table string
	// Snapshot is the snapshot to read; 0 the latest.
	Snapshot int64
	// Format is csv, parquet or jsonl; default from Out's extension, else
	// csv.
	Format string
	// PartitionBy writes one file per value of this column under Out,
	// with a manifest.json.
	PartitionBy string
	// BeforeRename, when set, is called once the file is complete under
	// its temporary name, before it is renamed to Out (a crash test of an
	// extension kills the process there).
	BeforeRename func()
}

// ExportResult reports an export. The JSON keys are those of idem export
// --json.
type ExportResult struct {
	Job      string `json:"job"`
	Table    string `json:"table"`
	Snapshot int64  `json:"snapshot"`
	Format   string `json:"format"`
	Path     string `json:"path"`
	Rows     int64  `json:"rows"`
	// Bytes and SHA256 are the file's; for a partitioned export the files'
	// total and the manifest's sha256.
	Bytes       int64  `json:"bytes"`
	SHA256      string `json:"sha256"`
	PartitionBy string `json:"partition_by,omitempty"`
	// Files are a partitioned export's files, as its manifest lists them.
	Files []ExportFile `json:"files,omitempty"`
}

// ExportManifest is the file of a partitioned export's folder that lists
// its files (ExportFile), written last.
const ExportManifest = export.ManifestName

// ParquetTypes is the table of the Parquet type a Parquet export writes
// for each DuckDB type.
const ParquetTypes = export.ParquetTypes

// ExportFile is one file of a partitioned export: its path relative to
// the export folder (with /), the partition's value as text (nil for
// NULL), its rows and distinct keys, the min and max of the partition
// column, and its bytes and sha256.
type ExportFile struct {
	Path         string  `json:"path"`
	Value        *string `json:"value"`
	Rows         int64   `json:"rows"`
	DistinctKeys int64   `json:"distinct_keys"`
	Min          *string `json:"min"`
	Max          *string `json:"max"`
	Bytes        int64   `json:"bytes"`
	SHA256       string  `json:"sha256"`
}
