package run

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/idem-dev/idem/internal/catalog"
	"github.com/idem-dev/idem/internal/job"
	"github.com/idem-dev/idem/internal/report"
	"github.com/idem-dev/idem/internal/seal"
	"github.com/idem-dev/idem/internal/source"
	"github.com/idem-dev/idem/internal/sqltext"

	duckdb "github.com/duckdb/duckdb-go/v2"
)

// StorageVersion is the storage format of the database files idem
// creates: the newest that DuckDB 1.5.6 reads.
const StorageVersion = "v1.5.0"

// DB is an open idem database: one DuckDB file holding the targets and
// idem's own tables in schema idem.
type DB struct {
	sql      *sql.DB
	path     string
	readOnly bool
	replica  bool         // [duckdb] read_replica: publish after commits
	note     *ReplicaNote // set when this is a replica read in place of path
	// self is the database file opened once to copy it (a replica, a
	// backup) and closed by Close: closing any descriptor of a file drops
	// every POSIX lock the process holds on it, DuckDB's writer lock
	// included, so a descriptor opened and closed per copy would let
	// another writer in.
	self *os.File
	// opts are the options it was opened with (Yield opens it again).
	opts OpenOptions
	// unsettled counts the commits of this handle that may be in the WAL
	// only, since the oldest of them; marks are the catalog marks (readMarks)
	// when the WAL last held none of its commits (settle.go).
	unsettled int
	since     time.Time
	marks     catalogMarks
	// tablesSeen is the largest table oid the last commit's checkpointNow
	// saw: tables at or below it were not created by a later commit.
	tablesSeen int64
	// catalogPending: a commit that may have created or altered a table
	// or an index is not known to be checkpointed (checkpointNow).
	catalogPending bool
	// guards keeps the verdicts of guards that are a function of content
	// (guardcache.go).
	guards *guardCache
	// gate lets one writing transaction of this handle run at a time
	// (RunTogether): DuckDB gives each transaction the snapshot of its
	// start, and a run's rows that follow the database's (the commit log's
	// next number, a first released version) must see every commit before
	// it. It also guards unsettled, since and marks.
	gate *sync.Mutex
	// deferred are the run log rows of runs that wrote nothing, written
	// with the next commit or at Close (runlog.go).
	deferred *deferredLog
	// verdictSecret signs the verdicts kept in idem.verdicts
	// (verdicts.go), as the open found it; nil trusts none.
	verdictSecret []byte
	// threads is the threads state of a writable handle opened without a
	// threads setting (threads.go); nil for any other.
	threads *adaptiveThreads
}

// OpenOptions are the settings applied when a database is opened.
type OpenOptions struct {
	ReadOnly bool
	DuckDB   job.DuckDBSettings
	// Wait retries an open that finds the file held by another writer until
	// this much time has passed. Zero fails at once.
	Wait time.Duration
	// Fault, when set, is called at the fault points of an open: those of
	// creating a new database or waiting for another writer
	// (FaultCreateBuilding, FaultCreateBuilt, FaultCreateLinked,
	// FaultOpenWait) and those of the migration of idem's own tables that a
	// writable open of an older database runs (catalog.FaultMigrateBeforeCommit,
	// catalog.FaultMigrateAfterCommit); crash tests.
	Fault func(point string)
	// Journal says how the open treats the erasure journal beside the
	// database (journal.go): JournalCheck (the default) refuses a database
	// that lacks an erasure the journal records, JournalSkip leaves the
	// journal alone (a scratch database of its own; the replay of the
	// journal, which opens the database to mend it).
	Journal JournalMode
	// Attach names other idem databases attached read-only beside the
	// file, each under its alias (an environment reads production's
	// committed snapshots through one: EnvironmentCatalog).
	Attach []Attachment
}

// Attachment is a database file attached read-only under Alias.
type Attachment struct {
	Alias string
	Path  string
}

// JournalMode is how an open treats the erasure journal.
type JournalMode int

const (
	JournalCheck JournalMode = iota
	JournalSkip
)

// Same reports whether o and p ask for the same open: the same settings,
// whatever their fault hooks.
func (o OpenOptions) Same(p OpenOptions) bool {
	return o.ReadOnly == p.ReadOnly && o.DuckDB == p.DuckDB && o.Wait == p.Wait && o.Journal == p.Journal && slices.Equal(o.Attach, p.Attach)
}

// Fault points of Open (OpenOptions.Fault). A writable open that creates
// the database (createFile) passes FaultCreateBuilding once
// <db>.creating-<pid>-<random> is open in DuckDB and before idem's tables
// are made in it, FaultCreateBuilt once it is complete, checkpointed and
// closed, before it is linked to <db>, and FaultCreateLinked once it is
// linked, before the creating name is removed. An open that finds the
// database held by another writer and may wait (OpenOptions.Wait) passes
// FaultOpenWait before its first wait.
const (
	FaultCreateBuilding = "create_building"
	FaultCreateBuilt    = "create_built"
	FaultCreateLinked   = "create_linked"
	FaultOpenWait       = "open_wait"
)

var lockPID = regexp.MustCompile(`\(PID (\d+)\)`)

// Open opens (creating it and its folders if needed, unless read-only) the
// database at path. A writable open brings idem's own tables to this idem's
// catalog version (catalog.Migrate); a read-only one reads an older
// database as it is. A database of a newer catalog version is refused
// (*catalog.VersionError, exit 3) before anything is written. A file held by
// another process, or a new database another process is creating, gives a
// *LockedError (exit 4). A WAL beside the database that holds commits of
// another database or of an older copy of this one is refused (exit 3)
// before it is replayed into the file. A read-only open never creates or
// changes anything.
func Open(ctx context.Context, path string, opts OpenOptions) (*DB, error) {
	return open(ctx, path, opts, nil)
}

// OpenReader opens the database at path read-only, or, when another writer
// holds it, its read replica (ReplicaPath) if there is one and accept
// takes what the replica holds (accept is called only when the replica
// is tried, so it knows which was opened).
// Otherwise it waits and fails as Open does: a *LockedError.
func OpenReader(ctx context.Context, path string, opts OpenOptions, accept func(*ReplicaNote) bool) (*DB, error) {
	opts.ReadOnly = true
	return open(ctx, path, opts, accept)
}

func open(ctx context.Context, path string, opts OpenOptions, accept func(*ReplicaNote) bool) (*DB, error) {
	if path == "" {
		return nil, report.Usage("no database: set database in the job file or pass --db")
	}
	if dir := filepath.Dir(path); dir != "" {
		st, err := os.Stat(dir)
		switch {
		case errors.Is(err, fs.ErrNotExist) && !opts.ReadOnly:
			// A writing command creates the database, folders included;
			// a reading one never creates anything.
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return nil, fmt.Errorf("open database %s: create folder %s: %w", path, dir, err)
			}
		case err != nil || !st.IsDir():
			return nil, fmt.Errorf("open database %s: folder %s does not exist", path, dir)
		}
	}
	if opts.DuckDB.Threads > report.MaxThreads {
		return nil, report.Usage("threads %d: at most %d", opts.DuckDB.Threads, report.MaxThreads)
	}
	if opts.ReadOnly {
		if _, err := os.Stat(path); err != nil {
			return nil, fmt.Errorf("open database %s: %w", path, err)
		}
	}
	q := url.Values{}
	q.Set("autoinstall_known_extensions", "false")
	if opts.DuckDB.MemoryLimit != "" {
		q.Set("memory_limit", opts.DuckDB.MemoryLimit)
	}
	if opts.DuckDB.Threads > 0 {
		q.Set("threads", strconv.Itoa(opts.DuckDB.Threads))
	}
	// Spill beside the database, as DuckDB does for a file it opens itself;
	// the in-memory database that attaches the file would spill to ./.tmp.
	tempDir := opts.DuckDB.TempDirectory
	if tempDir == "" {
		tempDir = path + ".tmp"
	}
	q.Set("temp_directory", tempDir)
	// jemalloc's background threads give freed memory back to the system as
	// a run goes, instead of at the end of DuckDB's tasks: at 10M rows under
	// memory_limit = 2GB the process peaked at 2.2-2.3 GiB with them and at
	// 2.5-3.4 GiB without (docs/benchmarks.md).
	q.Set("allocator_background_threads", "true")
	// A COMMIT that leaves the WAL past this checkpoints (settle.go).
	q.Set("checkpoint_threshold", walCheckpointThreshold)
	// A database file DuckDB 2.0 creates is one DuckDB 1.5 can read
	// (2.0's default is its own format, which 1.5 refuses with an I/O
	// error): an idem on DuckDB 1.5 then opens it and refuses it by its
	// catalog version (catalog/migrations/0007_duckdb_two.sql), exit 3.
	// A file keeps the format it was created with.
	q.Set("storage_compatibility_version", StorageVersion)
	dsn := "?" + q.Encode()
	if !opts.ReadOnly {
		sweepLeftovers(path, creatingTag)
		sweepLeftovers(ReplicaPath(path), replicaTag)
	}
	replicaTried := false
	// A wait is announced beside the database (waiting.go), so that a
	// follower holding it yields between batches.
	var marker string
	defer func() { unmarkWaiting(marker) }()
	deadline := time.Now().Add(opts.Wait)
	delay := 20 * time.Millisecond
	waited := false
	for {
		d, err := openOnce(ctx, dsn, path, opts)
		var locked *report.LockedError
		if err == nil || !errors.As(err, &locked) {
			return d, err
		}
		if opts.ReadOnly && accept != nil && !replicaTried {
			replicaTried = true
			if r, rerr := openReplica(ctx, path, opts); rerr == nil {
				if accept(r.note) {
					return r, nil
				}
				r.Close()
			}
		}
		left := time.Until(deadline)
		if left <= 0 {
			return nil, err
		}
		if marker == "" {
			marker = markWaiting(path)
		}
		if !waited && opts.Fault != nil {
			opts.Fault(FaultOpenWait)
		}
		waited = true
		select {
		case <-ctx.Done():
			return nil, err
		case <-time.After(min(delay, left)):
		}
		delay = min(delay*2, 500*time.Millisecond)
	}
}

// openOnce is one attempt of Open. A writable open creates the database
// when there is none (createFile) and, when a WAL is beside it, first
// opens it read-only to check the WAL (checkWAL) before a writable open
// replays it into the file.
func openOnce(ctx context.Context, dsn, path string, opts OpenOptions) (*DB, error) {
	wal := hasWAL(path)
	if !opts.ReadOnly {
		if err := createFile(ctx, dsn, path, opts.Fault); err != nil {
			return nil, err
		}
		if wal {
			ro := opts
			ro.ReadOnly, ro.Wait = true, 0
			d, err := openOnce(ctx, dsn, path, ro)
			if err != nil {
				return nil, err
			}
			if err := d.Close(); err != nil {
				return nil, fmt.Errorf("open database %s: %w", path, err)
			}
		}
	}
	db, err := openFile(ctx, dsn, path, opts.ReadOnly, opts.Attach...)
	if err != nil {
		if !strings.Contains(err.Error(), "Could not set lock on file") {
			err = fmt.Errorf("open database %s: %w", path, err)
			if wal {
				err = fmt.Errorf("%w (%s is beside it and DuckDB replays it on open: if it comes from another database or an older copy, move it away)", err, walPath(path))
			}
			return nil, report.Canceled(ctx, report.Fatal(err))
		}
		locked := &report.LockedError{Path: path, Err: err}
		if m := lockPID.FindStringSubmatch(err.Error()); m != nil {
			locked.PID, _ = strconv.Atoi(m[1])
		}
		return nil, locked
	}
	d := &DB{sql: db, path: path, readOnly: opts.ReadOnly, replica: opts.DuckDB.ReadReplica && !opts.ReadOnly, opts: opts, guards: newGuardCache(), gate: &sync.Mutex{}, deferred: &deferredLog{}}
	d.verdictSecret = verdictSecret(path, false)
	if !opts.ReadOnly && opts.DuckDB.Threads == 0 {
		d.threads = &adaptiveThreads{rows: smallRows, bytes: smallBytes}
	}
	// The checks below run one after another on one connection, kept in
	// the pool with its prepared statements for the runs that follow
	// (cleared of temp state before its next user: stmtcache.go).
	check := func(ctx context.Context) error { return catalog.Migrate(ctx, d.sql, d.path, opts.Fault) }
	if opts.ReadOnly {
		check = func(ctx context.Context) error {
			if wal {
				if err := catalog.CheckWAL(ctx, d.sql, d.path, walPath(d.path)); err != nil {
					return err
				}
			}
			return catalog.CheckVersion(ctx, d.sql, d.path)
		}
	}
	if err := check(ctx); err != nil {
		db.Close()
		return nil, err
	}
	if opts.Journal == JournalCheck {
		if err := d.checkJournal(ctx); err != nil {
			db.Close()
			return nil, err
		}
	}
	if !opts.ReadOnly {
		removeStaleScratch(path) // left by killed reruns (scratch.go)
		// Finish the file work a killed run or erasure left (store.go).
		if _, err := source.Sweep(ctx, d.sql, d.path); err != nil {
			db.Close()
			return nil, err
		}
		// A kill between a commit and its publication left the previous
		// replica: publish the missing one (best effort, as after a commit).
		if d.replica && d.replicaStale(ctx) {
			d.PublishReplica(ctx, nil)
		}
		d.settled(ctx, d.sql)
	} else {
		// A reader holds the file's lock too, so no writer is between
		// retain and COMMIT; deleting files writes nothing to the
		// database. A reader that may not delete still reads.
		_, _ = source.Sweep(ctx, d.sql, d.path)
	}
	return d, nil
}

// storeCatalog is the name the database file is attached under. A file's
// default catalog name is its base name, so a file named idem.duckdb would
// make the schema name idem ambiguous; a fixed alias avoids that.
const storeCatalog = seal.StoreCatalog

// openFile opens an in-memory DuckDB with the given settings and attaches
// the file as storeCatalog, the default catalog of every connection.
func openFile(ctx context.Context, dsn, path string, readOnly bool, others ...Attachment) (*sql.DB, error) {
	attach := "ATTACH IF NOT EXISTS " + sqltext.SQLString(path) + " AS " + storeCatalog
	if readOnly {
		attach += " (READ_ONLY)"
	}
	attaches := []string{attach}
	for _, o := range others {
		attaches = append(attaches, "ATTACH IF NOT EXISTS "+sqltext.SQLString(o.Path)+" AS "+sqltext.QuoteIdent(o.Alias)+" (READ_ONLY)")
	}
	// The pool opens connections as runs need them (and closes those a run
	// left with session state: stmtcache.go), so this runs long after Open
	// returned: it must not inherit Open's cancellation, or a Ctrl-C would
	// also stop the run log written after the rollback.
	initCtx := context.WithoutCancel(ctx)
	// An attachment and a GLOBAL setting belong to the DuckDB instance,
	// not the connection: the first connection makes them and the next
	// ones only choose the catalog (a statement costs about 0.4 ms, and a
	// project run opens a connection for each run that left session state).
	var instance struct {
		sync.Mutex
		done bool
	}
	connector, err := duckdb.NewConnector(dsn, func(ex driver.ExecerContext) error {
		instance.Lock()
		defer instance.Unlock()
		if !instance.done {
			for _, a := range attaches {
				if _, err := ex.ExecContext(initCtx, a, nil); err != nil {
					return err
				}
			}
			// current_timestamp stored in a TIMESTAMP column (run_at,
			// committed_at) is read back as UTC: store it as UTC,
			// whatever the machine's time zone.
			if _, err := ex.ExecContext(initCtx, "SET GLOBAL TimeZone = 'UTC'", nil); err != nil {
				return err
			}
			instance.done = true
		}
		_, err := ex.ExecContext(initCtx, "USE "+storeCatalog, nil)
		return err
	})
	if err != nil {
		return nil, err
	}
	return openConnector(ctx, connector)
}

// OpenMemory opens an in-memory DuckDB with the settings in dsn, for
// work that needs DuckDB but no database file (diff of two files, rule and
// lint checks).
func OpenMemory(ctx context.Context, dsn string) (*sql.DB, error) {
	connector, err := duckdb.NewConnector(dsn, func(driver.ExecerContext) error { return nil })
	if err != nil {
		return nil, err
	}
	return openConnector(ctx, connector)
}

func openConnector(ctx context.Context, connector *duckdb.Connector) (*sql.DB, error) {
	db := sql.OpenDB(&cachingConnector{inner: connector})
	// Idle connections are kept with their prepared statements; before one
	// is reused, its temp tables, views and variables are cleared, so no
	// run sees another run's temp state (stmtcache.go).
	db.SetMaxIdleConns(idleConns)
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, err
	}
	return db, nil
}

// Path is the database file's path.
func (d *DB) Path() string { return d.path }

// ReadOnly reports whether the database was opened read-only.
func (d *DB) ReadOnly() bool { return d.readOnly }

// SQL exposes the underlying pool for read-only helpers and tests.
func (d *DB) SQL() *sql.DB { return d.sql }

// Close writes the run log rows it deferred (runlog.go), checkpoints the
// commits this handle left in the WAL (Settle; when
// that fails they stay committed in the WAL, replayed by the next open,
// and the error is returned) and closes the database.
func (d *DB) Close() error {
	// Close takes no context: the checkpoint is of commits already made,
	// and a canceled command still closes its database.
	err := d.flushDeferred(context.Background())
	err = errors.Join(err, d.Settle(context.Background()))
	err = errors.Join(err, d.sql.Close())
	d.unsettled = 0 // closed: nothing of this handle is left to settle
	if d.self != nil {
		d.self.Close()
		d.self = nil
	}
	return err
}

// copyTo copies the database file to the new file dst through d.self.
func (d *DB) copyTo(dst string) (string, error) {
	if d.self == nil {
		f, err := os.Open(d.path)
		if err != nil {
			return "", err
		}
		d.self = f
	}
	if _, err := d.self.Seek(0, io.SeekStart); err != nil {
		return "", err
	}
	return copyFile(d.self, dst)
}

// BeginPinned opens a transaction on a connection of its own: temp tables and
// variables live per connection, so a transaction that uses them must not
// move across the pool. The caller closes the connection.
func (d *DB) BeginPinned(ctx context.Context) (*sql.Conn, *sql.Tx, error) {
	return d.BeginPinnedProgress(ctx, nil)
}

// BeginPinnedProgress is beginPinned that also turns on DuckDB's query
// progress for *progress on the pinned connection (see withQueryProgress).
func (d *DB) BeginPinnedProgress(ctx context.Context, progress *report.Progress) (*sql.Conn, *sql.Tx, error) {
	conn, err := d.sql.Conn(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("connect %s: %w", d.path, err)
	}
	if progress != nil {
		*progress = withQueryProgress(ctx, *progress, conn)
	}
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		conn.Close()
		return nil, nil, fmt.Errorf("begin: %w", err)
	}
	return conn, tx, nil
}
