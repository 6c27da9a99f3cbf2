package projectrun

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"

	"github.com/idem-dev/idem/internal/run"
)

// Handles keeps, in a project run, one open handle per database file, so
// that the jobs of one database (which run one after another) share one
// open: opening checks the file, its WAL and idem's tables each time, and
// that is most of an unchanged job's cost. A nil *Handles opens the
// database afresh on every Open and closes it when the job is done.
type Handles struct {
	mu   sync.Mutex
	open map[string]*handle
}

type handle struct {
	db   *run.DB
	opts run.OpenOptions
}

// NewHandles returns an empty pool; Close closes what it holds.
func NewHandles() *Handles { return &Handles{open: map[string]*handle{}} }

// Open opens the database at path (run.Open), or reuses the handle an
// earlier job of the same file opened with the same settings. The caller
// calls done with the job's error once the job is over: with a nil *Handles
// that closes the database, and otherwise a handle a job failed on is
// closed, so the next job opens the file afresh. done returns the error of
// a close, which for a database opened for writing can mean the commits
// its jobs left in the WAL were not checkpointed (they stay committed in
// the WAL, replayed by the next open). A handle kept across jobs
// checkpoints their commits once, when Close closes it at the end of the
// project run (run.DB.Close), not after each job.
func (h *Handles) Open(ctx context.Context, path string, opts run.OpenOptions) (db *run.DB, done func(error) error, err error) {
	if h == nil {
		db, err := run.Open(ctx, path, opts)
		if err != nil {
			return nil, nil, err
		}
		return db, func(error) error { return closeDB(db) }, nil
	}
	key := path
	if abs, err := filepath.Abs(path); err == nil {
		key = abs
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	var closeErr error
	if o, ok := h.open[key]; ok {
		if o.opts.Same(opts) {
			return o.db, h.release(key), nil
		}
		// Other settings: DuckDB opens a file once per process.
		closeErr = closeDB(o.db)
		delete(h.open, key)
	}
	db, err = run.Open(ctx, path, opts)
	if err != nil {
		return nil, nil, errors.Join(err, closeErr)
	}
	if closeErr != nil {
		return nil, nil, errors.Join(closeErr, closeDB(db))
	}
	h.open[key] = &handle{db: db, opts: opts}
	return db, h.release(key), nil
}

func (h *Handles) release(key string) func(error) error {
	return func(err error) error {
		if err == nil {
			return nil
		}
		h.mu.Lock()
		defer h.mu.Unlock()
		o, ok := h.open[key]
		if !ok {
			return nil
		}
		delete(h.open, key)
		return closeDB(o.db)
	}
}

// Close closes every handle the pool holds and returns their close errors
// joined.
func (h *Handles) Close() error {
	if h == nil {
		return nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	var errs []error
	for key, o := range h.open {
		errs = append(errs, closeDB(o.db))
		delete(h.open, key)
	}
	return errors.Join(errs...)
}

// closeDB closes db, naming it in the error.
func closeDB(db *run.DB) error {
	if err := db.Close(); err != nil {
		return fmt.Errorf("close database %s: %w", db.Path(), err)
	}
	return nil
}
