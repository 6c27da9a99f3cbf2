package runner

import (
	"encoding/json"
	"time"

	"github.com/idem-dev/idem/internal/job"
	"github.com/idem-dev/idem/internal/ops"
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
}

// options checks b and returns the run's options.
func (b Batch) options() (run.RunOptions, error) {
	if (b.From == nil) != (b.To == nil) {
		return run.RunOptions{}, job.Usage("Batch: From and To go together")
	}
	return run.RunOptions{Input: b.Input, BatchID: b.ID, From: b.From, To: b.To, Epoch: b.Epoch,
		ExpectParent: b.ExpectParent, Partitions: b.Partitions, Expire: ops.ExpireAfterRun}, nil
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
// [input] mode = "files" or chunk_rows job) has one Result per committed
// batch in Runs, and its other fields but Job, Decision and NewFiles are
// zero.
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
	// (idem run --full-refresh; runner has no option for it yet).
	FullRefresh bool `json:"full_refresh,omitempty"`
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
}

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
	out.Changed = job.NonNil(out.Changed)
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
	// BlockedBy, Error and ExitCode as in Result.
	BlockedBy []string `json:"blocked_by,omitempty"`
	Error     string   `json:"error,omitempty"`
	ExitCode  int      `json:"exit_code,omitempty"`
}

func planOf(p *ops.Plan) *Plan {
	return &Plan{Job: p.Job, Mode: p.Mode, Decision: Decision(p.Decision), Changed: job.NonNil(p.Changed), FirstLoad: p.FirstLoad,
		JobKey: p.JobKey, BatchID: p.BatchID, Snapshot: p.Snapshot, Cursor: p.Cursor, Epoch: p.Epoch,
		Reason: p.Reason, NewFiles: p.NewFiles, Error: p.Error, ExitCode: p.ExitCode}
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
}

// ExportResult reports an export. The JSON keys are those of idem export
// --json (without the partitioned export's file list).
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
}

// LogEntry is one run of a job as idem log lists it. The JSON keys are
// those of idem log --json.
type LogEntry struct {
	// Time is when the run was recorded (UTC).
	Time time.Time `json:"time"`
	// BatchID is the batch the run applied or was given; nil for none.
	BatchID *string `json:"batch_id"`
	// Decision is a run's decision (loaded, applied, skipped,
	// already_committed, refused, failed) or fenced, erased, rolled_back.
	Decision string   `json:"decision"`
	Changed  []string `json:"changed"`
	// RowsIn is nil for an entry that read no input.
	RowsIn   *int64           `json:"rows_in"`
	Outcomes map[string]int64 `json:"outcomes"`
	Snapshot int64            `json:"snapshot"`
	Cursor   int64            `json:"cursor"`
	Epoch    int64            `json:"epoch"`
	// Message says why a run wrote nothing, exactly as recorded.
	Message *string `json:"message,omitempty"`
	// FirstLoad is true for the run that committed the job's first
	// snapshot.
	FirstLoad bool `json:"first_load"`
}

// Packet is the release packet of a snapshot, as idem show prints it: what
// the run that committed it wrote, recorded in its transaction. The JSON
// keys are those of idem show --json.
type Packet struct {
	Job      string `json:"job"`
	Snapshot int64  `json:"snapshot"`
	Parent   int64  `json:"parent"`
	JobKey   string `json:"job_key"`
	// Parts are the job key's parts as recorded (input, transform,
	// config, schema), canonical JSON.
	Parts            json.RawMessage  `json:"parts"`
	Pipeline         string           `json:"pipeline"`
	TransformVersion int              `json:"transform_version"`
	SchemaVersion    int              `json:"schema_version"`
	Inputs           []InputRef       `json:"inputs"`
	RowsIn           int64            `json:"rows_in"`
	Outcomes         map[string]int64 `json:"outcomes"`
	Key              []string         `json:"key"`
	// PartitionBy is the job's partition column; "" for a job without
	// one, whose packet has one entry for the whole target.
	PartitionBy string        `json:"partition_by,omitempty"`
	Entries     []PacketEntry `json:"entries"`
	// PayloadVersions counts the run's input rows by payload schema
	// version, for a pipeline that keeps one (orders).
	PayloadVersions map[string]int64 `json:"payload_versions,omitempty"`
	// Erasures are the erasures that rewrote this snapshot's rows since,
	// each with the entries it replaced: Entries describe the rows as
	// they are now.
	Erasures []PacketErasure `json:"erasures,omitempty"`
	// Requested and RequestedKind name the snapshot asked for when it was
	// an erasure or a rollback, which write no packet.
	Requested     int64  `json:"requested_snapshot,omitempty"`
	RequestedKind string `json:"requested_kind,omitempty"`
}

// InputRef is an input file of a snapshot: its sha256, size and name.
type InputRef struct {
	SHA256 string `json:"sha256"`
	Bytes  int64  `json:"bytes"`
	Name   string `json:"name"`
}

// PacketEntry describes one partition a run touched (Partition nil and
// Whole set: the whole target) as committed.
type PacketEntry struct {
	Partition *string `json:"partition"`
	Whole     bool    `json:"whole_target,omitempty"`
	// Repaired marks a partition the run touched only to remove keys
	// that moved into a replaced partition.
	Repaired     bool  `json:"repaired,omitempty"`
	Rows         int64 `json:"rows"`
	DistinctKeys int64 `json:"distinct_keys"`
	// Bounds are the min and max, as text, of each key column and the
	// partition column; nil for an empty partition.
	Bounds map[string][2]*string `json:"bounds"`
	// SHA256 and Bytes are those of the entry's rows written as idem
	// export --format csv writes them (with --partition-by for a
	// partition). An entry replaced by an erasure before they were
	// computed has none (Pending).
	SHA256 string `json:"sha256"`
	Bytes  int64  `json:"bytes"`
}

// Pending says the entry's sha256 and bytes were never computed.
func (e PacketEntry) Pending() bool { return e.SHA256 == "" }

// PacketErasure is one erasure that rewrote a snapshot's rows: the
// erasure's snapshot and the entries the packet had before.
type PacketErasure struct {
	Snapshot int64         `json:"snapshot"`
	Replaced []PacketEntry `json:"replaced"`
}

// FenceResult is the writer epoch a fence set. The JSON keys are those of
// idem fence --json.
type FenceResult struct {
	Job   string `json:"job"`
	Epoch int64  `json:"epoch"`
}

// ReplicaInfo reports the read replica a commit published ([duckdb]
// read_replica): a copy of the database file readers open while a writer
// holds it. The JSON keys are those of the commands' --json.
type ReplicaInfo struct {
	Path    string  `json:"path"`
	Seconds float64 `json:"seconds"`
	Bytes   int64   `json:"bytes"`
	// Method is how the file was made: clone (a reflink), copy, or
	// rewrite (once the database holds an erasure).
	Method string `json:"method"`
	// Commit is the database's commit sequence the replica holds.
	Commit int64 `json:"commit"`
	// Error says why the publication failed; the commit stands and the
	// previous replica stays in place.
	Error string `json:"error,omitempty"`
}

// RollbackOptions guard Project.Rollback as a Batch guards a run.
type RollbackOptions struct {
	// To is the snapshot whose rows become current (required).
	To int64
	// ExpectParent, when set, refuses the rollback unless the job's
	// latest snapshot is this one; Epoch unless it is the job's writer
	// epoch.
	ExpectParent, Epoch *int64
}

// RollbackResult reports a rollback: the new snapshot holding the rows of
// snapshot To. The JSON keys are those of idem rollback --json.
type RollbackResult struct {
	Job      string       `json:"job"`
	To       int64        `json:"to_snapshot"`
	Snapshot int64        `json:"snapshot"`
	Parent   int64        `json:"parent"`
	RowsOut  int64        `json:"rows_out"`
	Replica  *ReplicaInfo `json:"replica,omitempty"`
}

// ExpireOptions say what Project.Expire keeps.
type ExpireOptions struct {
	// Keep is the number of newest snapshots that stay readable; 0 takes
	// the job's [retention] keep_snapshots.
	Keep int64
	// DryRun reports what would be removed and changes nothing (the
	// database is only read).
	DryRun bool
	// Epoch, when set, refuses the expiry unless it is the job's writer
	// epoch; a job with [job] fencing = "required" needs it.
	Epoch *int64
}

// ExpireResult reports an expiry; counts are of what was removed (with
// DryRun, what would be). The JSON keys are those of idem expire --json.
type ExpireResult struct {
	Job    string `json:"job"`
	DryRun bool   `json:"dry_run"`
	Keep   int64  `json:"keep_snapshots"`
	Latest int64  `json:"latest"`
	// OldestKept is the oldest readable snapshot after the expiry, and
	// Previous the one before it.
	OldestKept int64 `json:"oldest_kept"`
	Previous   int64 `json:"previous_oldest_kept"`
	Expired    int64 `json:"expired"`
	// HeldBy names the downstream jobs that hold an older snapshot, each
	// with the oldest it holds, which is kept; Pins say why.
	HeldBy map[string]int64 `json:"held_by"`
	Pins   []Pin            `json:"pins"`
	// InputsFrom is the first snapshot whose retained inputs a rerun of a
	// kept snapshot needs.
	InputsFrom  int64 `json:"inputs_from"`
	HistoryRows int64 `json:"history_rows"`
	OutcomeRows int64 `json:"outcome_rows"`
	Packets     int64 `json:"packets"`
	Inputs      int   `json:"inputs"`
	InputBytes  int64 `json:"input_bytes"`
	// Checkpoints are the checkpoints removed, and their bytes.
	Checkpoints     int          `json:"checkpoints"`
	CheckpointBytes int64        `json:"checkpoint_bytes"`
	Replica         *ReplicaInfo `json:"replica,omitempty"`
}

// Pin is a snapshot a downstream job holds, which expiry keeps.
type Pin struct {
	// Job is the downstream job, Snapshot the snapshot it holds.
	Job      string `json:"job"`
	Snapshot int64  `json:"snapshot"`
	// Rerun is the kept snapshot of Job whose rerun reads Snapshot; 0
	// when the pin is Job's next read of changes.
	Rerun int64 `json:"rerun,omitempty"`
}

// String says why the pin holds its snapshot.
func (p Pin) String() string { return ops.Pin(p).String() }

// AuditResult reports what an audit read of a partitioned Parquet export
// and what a full scan of it read. The JSON keys are those of idem show
// --audit --json.
type AuditResult struct {
	Job         string     `json:"job"`
	Export      string     `json:"export"`
	Snapshot    int64      `json:"snapshot"`
	PartitionBy string     `json:"partition_by"`
	Where       string     `json:"where"`
	Audit       ScanFigure `json:"audit"`
	Full        ScanFigure `json:"full_scan"`
	// ByteRatio is Audit.Bytes / Full.Bytes.
	ByteRatio float64 `json:"byte_ratio"`
}

// ScanFigure is one query's reading: the Parquet files it read of those
// there, its rows, the row groups and compressed bytes of the files read,
// and DuckDB's total_bytes_read.
type ScanFigure struct {
	Rows       int64 `json:"rows"`
	Files      int64 `json:"files"`
	FilesTotal int64 `json:"files_total"`
	RowGroups  int64 `json:"row_groups"`
	Bytes      int64 `json:"bytes"`
	BytesRead  int64 `json:"bytes_read"`
}

// DUResult is where a job's bytes go, as idem du reports it. The JSON
// keys are those of idem du --json.
type DUResult struct {
	Job      string `json:"job"`
	Database string `json:"database"`
	// FileBytes is the database file's size with its WAL.
	FileBytes int64 `json:"file_bytes"`
	// Environments are the job database's environments (idem env), each
	// with its file's bytes.
	Environments []EnvBytes `json:"environments"`
	// Iceberg counts the files of the job's Iceberg table in a local
	// warehouse; nil without one.
	Iceberg *WarehouseBytes `json:"iceberg,omitempty"`
	// UsedBytes and FreeBytes are the database's used and free blocks;
	// TablesBytes all its tables', estimated as Estimate says.
	UsedBytes   int64  `json:"used_bytes"`
	FreeBytes   int64  `json:"free_bytes"`
	TablesBytes int64  `json:"tables_bytes"`
	Estimate    string `json:"estimate"`
	// Latest and OldestKept bound the readable snapshots.
	Latest        int64   `json:"latest"`
	OldestKept    int64   `json:"oldest_kept"`
	KeepSnapshots int64   `json:"keep_snapshots"`
	Bytes         DUBytes `json:"bytes"`
	Rows          DURows  `json:"rows"`
	InputFiles    int64   `json:"input_files"`
	// TombstonesInTarget says the tombstones are target rows (status
	// deleted), counted in the target too.
	TombstonesInTarget bool `json:"tombstones_in_target"`
	// Snapshots says, for each kept snapshot below the latest, what
	// expiring it and every older one would free.
	Snapshots []DUSnapshot `json:"snapshots"`
	Pins      []Pin        `json:"pins"`
}

// EnvBytes is an environment's database file and its bytes.
type EnvBytes struct {
	Name  string `json:"name"`
	Bytes int64  `json:"bytes"`
}

// WarehouseBytes counts the files of an Iceberg table in a local
// warehouse.
type WarehouseBytes struct {
	Location string `json:"location"`
	Bytes    int64  `json:"bytes"`
	Files    int    `json:"files"`
}

// DUBytes are a job's bytes by kind.
type DUBytes struct {
	Target      int64 `json:"target"`
	History     int64 `json:"history"`
	Outcomes    int64 `json:"outcomes"`
	Tombstones  int64 `json:"tombstones"`
	Inputs      int64 `json:"retained_inputs"`
	Checkpoints int64 `json:"checkpoints"`
	Total       int64 `json:"total"`
}

// DURows are a job's rows by table.
type DURows struct {
	Target     int64 `json:"target"`
	History    int64 `json:"history"`
	Outcomes   int64 `json:"outcomes"`
	Tombstones int64 `json:"tombstones"`
}

// DUSnapshot is what expiring a snapshot and every older one would free.
type DUSnapshot struct {
	Snapshot    int64 `json:"snapshot"`
	FreesBytes  int64 `json:"frees_bytes"`
	HistoryRows int64 `json:"history_rows"`
	OutcomeRows int64 `json:"outcome_rows"`
	Inputs      int   `json:"inputs"`
	InputBytes  int64 `json:"input_bytes"`
	// HeldBy are the pins on it, which expiry keeps.
	HeldBy []Pin `json:"held_by,omitempty"`
}
