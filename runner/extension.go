// The seam of an extension that reads what a job committed (the Iceberg
// publisher, issue 46): a Reader on the job's database gives its kept
// snapshots, pinned reads of them as SQL inside one read transaction, the
// canonical export and a folder for temporary files; the helpers below
// quote SQL and make the errors the idem command maps to exit codes.

package runner

import (
	"context"
	"database/sql"
	"errors"

	"github.com/idem-dev/idem/internal/export"
	"github.com/idem-dev/idem/internal/inspect"
	"github.com/idem-dev/idem/internal/job"
	"github.com/idem-dev/idem/internal/report"
	"github.com/idem-dev/idem/internal/run"
	"github.com/idem-dev/idem/internal/sqltext"
)

// ReaderOptions say how OpenReader opens a job's database.
type ReaderOptions struct {
	// ReadOnly opens the database read-only, beside other readers;
	// otherwise it is opened as a writer opens it (holding the writer's
	// lock, WithWait waiting for it), though a Reader writes nothing.
	ReadOnly bool
}

// Reader is an open handle on the database of one job of a project, for
// an extension that reads what the job committed (an AfterCommit hook, an
// extension's verb). It writes nothing to the database. Close it.
//
// The errors of OpenReader and of a Reader's methods are *JobError whose
// Job is empty, so that their text does not name the job: the extension
// names it in its own messages (ExitCode and errors.Is work as for any
// other error of this package).
type Reader struct {
	j  *job.Job
	db *run.DB
}

// OpenReader opens the database of job name with the project's settings
// (WithDatabase, the DuckDB options, WithWait). Errors: an unknown job
// (ErrUsage), a database held by a writer (ErrLocked).
func (p *Project) OpenReader(ctx context.Context, name string, opts ReaderOptions) (*Reader, error) {
	j, db, err := p.open(ctx, name, opts.ReadOnly)
	if err != nil {
		return nil, readerError(err)
	}
	return &Reader{j: j, db: db}, nil
}

// Close closes the database.
func (r *Reader) Close() error { return r.db.Close() }

// Path is the database file.
func (r *Reader) Path() string { return r.db.Path() }

// KeptSnapshots are the snapshots of a job its database keeps (those not
// expired), in order, with the database's id (the same in every copy of
// it, a backup's too) and the job's last erasure snapshot (0: none).
type KeptSnapshots struct {
	DatabaseID  string         `json:"database_id"`
	Snapshots   []KeptSnapshot `json:"snapshots"`
	LastErasure int64          `json:"last_erasure"`
}

// KeptSnapshot is one kept snapshot of a job: its kind (SnapshotErase,
// SnapshotRollback, or the kind of a run), its job key, and the columns and key columns of
// the target it holds.
type KeptSnapshot struct {
	Snapshot int64    `json:"snapshot"`
	Kind     string   `json:"kind"`
	JobKey   string   `json:"job_key"`
	Columns  []Column `json:"columns"`
	Key      []string `json:"key"`
}

// Column is a column of a target: its name and DuckDB type.
type Column struct {
	Name string `json:"name"`
	Type string `json:"type"`
}

// Snapshots reads the job's kept snapshots, in one read transaction.
func (r *Reader) Snapshots(ctx context.Context) (*KeptSnapshots, error) {
	k, err := inspect.ReadKept(ctx, r.db, r.j)
	if err != nil {
		return nil, readerError(err)
	}
	var out KeptSnapshots
	return &out, convert(k, &out)
}

// Export writes a snapshot of the job's target as Project.Export does
// (opts.Snapshot 0: the latest), through the open database: the same
// bytes and sha256 as idem export. The project's WithProgress and
// WithFaultHook do not hear it: the extension reports its own work.
func (r *Reader) Export(ctx context.Context, opts ExportOptions) (*ExportResult, error) {
	res, err := exportOn(ctx, r.j, r.db, opts, report.Progress{}, nil)
	return res, readerError(err)
}

// TempDir makes a new folder for this process's temporary files (the
// exports a publisher hashes) beside the database, in the folder an
// erasure removes whole (a temporary export may hold an erased subject),
// after removing those of processes that are gone. The caller removes it.
func (r *Reader) TempDir() (string, error) {
	dir, err := inspect.PublishTemp(r.db.Path())
	return dir, readerError(err)
}

// ReadTx is one read transaction on a Reader's database, on one pinned
// connection: every SnapshotTable of it reads the same commit. Statements
// of the caller run in Tx (a COPY of a pinned read to a file); none may
// write the database. Close rolls it back.
type ReadTx struct {
	j    *job.Job
	conn *sql.Conn
	tx   *sql.Tx
}

// Begin starts a read transaction.
func (r *Reader) Begin(ctx context.Context) (*ReadTx, error) {
	conn, tx, err := r.db.BeginPinned(ctx)
	if err != nil {
		return nil, readerError(err)
	}
	return &ReadTx{j: r.j, conn: conn, tx: tx}, nil
}

// Tx is the transaction, for the caller's own statements.
func (t *ReadTx) Tx() *sql.Tx { return t.tx }

// Close rolls the transaction back and releases its connection.
func (t *ReadTx) Close() error {
	err := t.tx.Rollback()
	if errors.Is(err, sql.ErrTxDone) {
		err = nil
	}
	return errors.Join(err, t.conn.Close())
}

// SnapshotTable is the job's target pinned at a snapshot: Query is a
// SELECT of its rows, in key order, valid inside the ReadTx it came from;
// Columns are its columns and Key its key columns.
type SnapshotTable struct {
	Snapshot int64
	Query    string
	Columns  []Column
	Key      []string
}

// Table is the read of the job's target at snapshot (0: the latest). An
// expired snapshot is refused (ErrRefused).
func (t *ReadTx) Table(ctx context.Context, snapshot int64) (*SnapshotTable, error) {
	pt, err := export.PinnedRead(ctx, t.tx, t.j, snapshot)
	if err != nil {
		return nil, readerError(err)
	}
	out := &SnapshotTable{Snapshot: pt.Snapshot, Query: pt.Query, Columns: make([]Column, len(pt.Columns)), Key: pt.Key}
	for i, c := range pt.Columns {
		out.Columns[i] = Column(c)
	}
	return out, nil
}

// readerError is err (nil stays nil) as a Reader returns it: a *JobError
// whose Job is empty.
func readerError(err error) error {
	var je *JobError
	if errors.As(err, &je) {
		return &JobError{Code: je.Code, Err: je.Err}
	}
	return jobError("", err)
}

// CanonicalCSV writes the rows of query, run on the DuckDB database db,
// to the file out as idem export writes a CSV: in the query's order, with
// the bytes idem export gives the same rows and types, so that the file's
// sha256 is comparable with an ExportResult's (a table read back from
// elsewhere and checked against idem's snapshot).
func CanonicalCSV(ctx context.Context, db *sql.DB, query, out string) error {
	return inspect.CanonicalCSV(ctx, db, query, out)
}

// QuoteIdent quotes a SQL identifier for DuckDB: "name", a double quote
// doubled.
func QuoteIdent(name string) string { return sqltext.QuoteIdent(name) }

// QuoteString quotes a SQL string literal for DuckDB: 'text', a single
// quote doubled.
func QuoteString(s string) string { return sqltext.SQLString(s) }

// TrimSQLError shortens a DuckDB error to its first paragraph (the
// message without the LINE excerpt of the query), wrapping err; nil stays
// nil.
func TrimSQLError(err error) error {
	if err == nil {
		return nil
	}
	return inspect.TrimSQLError(err)
}

// Usage is an extension's usage error: ErrUsage (exit 2) with the
// formatted message.
func Usage(format string, args ...any) error {
	return jobError("", report.Usage(format, args...))
}

// Refuse is an extension's refusal by its guard: ErrRefused (exit 3),
// whose message is "refused: " and the formatted message. Nothing may
// have been committed.
func Refuse(guard, format string, args ...any) error {
	return jobError("", report.Refuse(guard, format, args...))
}

// Thousands writes n in decimal with a comma between each group of three
// digits, as the idem command prints counts.
func Thousands(n int64) string { return report.Thousands(n) }

// CatalogKind names the kind of catalog t.Catalog is: "postgres",
// "sqlite" or "rest" (an Iceberg REST catalog at an http(s):// URL).
func (t *IcebergTable) CatalogKind() string {
	return (&job.PublishIceberg{Catalog: t.Catalog}).CatalogKind()
}

// exportOn is Export of job j through the open db, telling progress and
// fault (nil: none) of its work.
func exportOn(ctx context.Context, j *job.Job, db *run.DB, opts ExportOptions, progress report.Progress, fault func(string)) (*ExportResult, error) {
	if opts.BeforeRename != nil {
		outer := fault
		fault = func(point string) {
			if point == export.FaultExportBeforeSwap {
				opts.BeforeRename()
			}
			if outer != nil {
				outer(point)
			}
		}
	}
	res, err := export.Export(ctx, db, j, export.Options{Out: opts.Out, Table: opts.Table, Snapshot: opts.Snapshot,
		Format: opts.Format, PartitionBy: opts.PartitionBy, Progress: progress, Fault: fault})
	if err != nil {
		return nil, err
	}
	var out ExportResult
	return &out, convert(res, &out)
}
