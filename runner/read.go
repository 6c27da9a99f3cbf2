package runner

import (
	"context"
	"time"

	"github.com/idem-dev/idem/internal/diff"
	"github.com/idem-dev/idem/internal/inspect"
	"github.com/idem-dev/idem/internal/job"
	"github.com/idem-dev/idem/internal/report"
	"github.com/idem-dev/idem/internal/run"
)

// ReplicaNote says a read went to the read replica of a database a
// writer held ([duckdb] read_replica): the replica's file, the database
// it copies, the commit it holds, when it was published and each job's
// snapshot there.
type ReplicaNote struct {
	Path, Primary string
	Commit        int64
	PublishedAt   time.Time
	Snapshots     []ReplicaSnapshot
}

// ReplicaSnapshot is a job's latest snapshot in a read replica.
type ReplicaSnapshot struct {
	Job      string
	Snapshot int64
}

// WithReplicaReads lets a read of pinned snapshots (Export of a given
// Snapshot, Diff) that finds the database held by a writer read its read
// replica instead, when the replica holds every snapshot it reads; note
// is told which replica it read (the idem command says so on stderr).
// Without it such a read waits (WithWait) or fails with ErrLocked.
func WithReplicaReads(note func(ReplicaNote)) Option {
	return optionFunc(func(s *settings) error {
		if note == nil {
			return report.Usage("WithReplicaReads: nil func")
		}
		s.replica = note
		return nil
	})
}

// readPinned is read for a call that reads snapshots pinned of job name
// (none: the latest): a replica holding them all serves it when
// WithReplicaReads allows.
func readPinned[T any](ctx context.Context, p *Project, name string, pinned []int64, f func(*job.Job, *run.DB) (T, error)) (T, error) {
	var zero T
	j, err := p.job(name)
	if err != nil {
		return zero, err
	}
	path, oo, err := p.database(j)
	if err != nil {
		return zero, jobError(name, err)
	}
	var accept func(*run.ReplicaNote) bool
	if p.s.replica != nil && len(pinned) > 0 {
		accept = func(n *run.ReplicaNote) bool {
			for _, s := range pinned {
				if !n.Holds(j.Name, s) {
					return false
				}
			}
			p.s.replica(replicaNoteOf(n))
			return true
		}
	}
	db, err := run.OpenReader(ctx, path, oo, accept)
	if err != nil {
		return zero, jobError(name, err)
	}
	defer db.Close() // read-only: nothing to lose
	res, err := f(j, db)
	if err != nil {
		return zero, jobError(name, err)
	}
	return res, nil
}

func replicaNoteOf(n *run.ReplicaNote) ReplicaNote {
	out := ReplicaNote{Path: n.Path, Primary: n.Primary, Commit: n.Commit, PublishedAt: n.PublishedAt,
		Snapshots: make([]ReplicaSnapshot, len(n.Snapshots))}
	for i, s := range n.Snapshots {
		out.Snapshots[i] = ReplicaSnapshot{Job: s.Job, Snapshot: s.Snapshot}
	}
	return out
}

// DiffOptions say what Project.Diff compares: the job's target (Table
// "", or the target's name) or <target>_outcomes at snapshots From and
// To, both required.
type DiffOptions struct {
	From, To int64
	Table    string
}

// DiffSide is one side of a diff: a snapshot or a file, with the sha256
// of its canonical export (csv, key order) and its rows.
type DiffSide struct {
	Snapshot int64  `json:"snapshot,omitempty"`
	Path     string `json:"path,omitempty"`
	SHA256   string `json:"sha256"`
	Rows     int64  `json:"rows"`
}

// DiffResult compares two sides by key: rows whose key is only in To are
// added, only in From removed, in both with other values changed. The key
// lists hold the first keys of each kind, in key order. The JSON keys are
// those of idem diff --json.
type DiffResult struct {
	// Job and Table are empty for a diff of two files.
	Job         string   `json:"job,omitempty"`
	Table       string   `json:"table,omitempty"`
	Key         []string `json:"key"`
	From        DiffSide `json:"from"`
	To          DiffSide `json:"to"`
	Identical   bool     `json:"identical"`
	Added       int64    `json:"added"`
	Removed     int64    `json:"removed"`
	Changed     int64    `json:"changed"`
	AddedKeys   []string `json:"added_keys"`
	RemovedKeys []string `json:"removed_keys"`
	ChangedKeys []string `json:"changed_keys"`
	// ChangedRows, in a rerun that does not reproduce, are the first
	// changed rows in key order, column by column.
	ChangedRows []RowDifference `json:"changed_rows,omitempty"`
	// ColumnsAdded, ColumnsRemoved and ColumnsRetyped are a schema change
	// between the sides; rows are then compared on the columns both have.
	ColumnsAdded   []string       `json:"columns_added,omitempty"`
	ColumnsRemoved []string       `json:"columns_removed,omitempty"`
	ColumnsRetyped []ColumnChange `json:"columns_retyped,omitempty"`
	// Partitions are, for a job with [target] partition_by, the
	// partitions whose rows differ, in the column's order.
	Partitions []string `json:"partitions,omitempty"`
}

// RowDifference is a changed row: its key (as in ChangedKeys) and the
// columns whose values differ.
type RowDifference struct {
	Key     string             `json:"key"`
	Columns []ColumnDifference `json:"columns"`
}

// ColumnDifference is one column of a changed row: its value on each side
// as text (nil for NULL) and, when both read as numbers, to minus from.
type ColumnDifference struct {
	Column string   `json:"column"`
	From   *string  `json:"from"`
	To     *string  `json:"to"`
	Delta  *float64 `json:"delta,omitempty"`
}

// ColumnChange is a column whose type changed between two sides.
type ColumnChange struct {
	Name string `json:"name"`
	From string `json:"from"`
	To   string `json:"to"`
}

// Diff compares a table of job name at two snapshots by key, as idem diff
// JOB does: each side's sha256 is that of its canonical export. The
// database is only read. Errors: a missing From or To (ErrUsage), sides
// with different columns (a rename, ErrUsage), an expired snapshot
// (ErrRefused).
func (p *Project) Diff(ctx context.Context, name string, opts DiffOptions) (*DiffResult, error) {
	return readPinned(ctx, p, name, []int64{opts.From, opts.To}, func(j *job.Job, db *run.DB) (*DiffResult, error) {
		res, err := diff.Diff(ctx, db, j, diff.Options{From: opts.From, To: opts.To, Table: opts.Table})
		if err != nil {
			return nil, err
		}
		var out DiffResult
		return &out, convert(res, &out)
	})
}

// DiffFiles compares two exported files (csv, parquet or jsonl; format ""
// from the extension) by the key columns (nil: the first column), values
// as text, as idem diff FILE1 FILE2 does. Errors (ErrUsage): files with
// different headers, a key not unique in either file (naming the columns
// that are).
func DiffFiles(ctx context.Context, file1, file2, format string, key []string) (*DiffResult, error) {
	res, err := diff.DiffFiles(ctx, file1, file2, format, key)
	if err != nil {
		return nil, jobError("", err)
	}
	var out DiffResult
	return &out, convert(res, &out)
}

// Rows is a Query's result: the column names, how each column's text is
// written where types matter (Kinds), and the values as the text DuckDB's
// own CLI prints for them, nil for NULL.
type Rows struct {
	Columns []string
	Kinds   []Kind
	Values  [][]any
}

// Kind is what a column's values are, for an output that has types
// (JSON): KindText, KindNumber or KindBool.
type Kind = run.Kind

// The kinds of a Rows column.
const (
	KindText   = run.KindText   // text, dates, times, intervals, UUIDs, blobs, lists, structs, maps
	KindNumber = run.KindNumber // an integer, DECIMAL or floating-point value
	KindBool   = run.KindBool
)

// Query runs one read-only statement against the database file at path,
// as idem query does: SELECT (FROM, WITH, VALUES, DESCRIBE, SHOW,
// SUMMARIZE, PRAGMA table_info) or EXPLAIN, on the database attached
// read-only with external access off and the configuration locked, so
// nothing can write a database or a file, attach, install, load or change
// a setting (anything else fails, exit 1). Under WithReplicaReads a
// database held by a writer is read from its read replica at once,
// whatever it holds; otherwise the read waits (WithWait) or fails with
// ErrLocked. WithDatabase is not its to give.
func Query(ctx context.Context, path, query string, opts ...Option) (*Rows, error) {
	var s settings
	for _, o := range opts {
		if err := o.apply(&s); err != nil {
			return nil, jobError("", err)
		}
	}
	var accept func(*run.ReplicaNote) bool
	if s.replica != nil {
		accept = func(n *run.ReplicaNote) bool {
			s.replica(replicaNoteOf(n))
			return true
		}
	}
	rows, err := inspect.QueryTextReader(ctx, path, query, run.OpenOptions{DuckDB: s.duckdb, Wait: s.wait}, accept)
	if err != nil {
		return nil, jobError("", err)
	}
	return &Rows{Columns: rows.Columns, Kinds: rows.Kinds, Values: rows.Values}, nil
}
