package runner

import (
	"encoding/json"
	"time"

	"github.com/idem-dev/idem/internal/history"
	"github.com/idem-dev/idem/internal/report"
)

// The results of the verbs on a job's committed state (log, show, fence,
// rollback, expire, audit, du): the JSON keys are those of the commands'
// --json, kept in step with the internal types by TestResultsInStep.

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

// The kinds of a snapshot that writes no packet (Packet.RequestedKind):
// an erasure and a rollback.
const (
	SnapshotErase    = report.KindErase
	SnapshotRollback = report.KindRollback
)

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
func (p Pin) String() string { return history.Pin(p).String() }

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
