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
// that the jobs of one database share one open: opening checks the file,
// its WAL and idem's tables each time, and that is most of an unchanged
// job's cost. Jobs running at once share the handle (run.DB lets one
// writing transaction in at a time). A nil *Handles opens the database
// afresh on every Open and closes it when the job is done.
type Handles struct {
	mu   sync.Mutex
	free *sync.Cond // signalled when a handle's last user is done
	open map[string]*handle
}

type handle struct {
	db    *run.DB
	opts  run.OpenOptions
	users int  // jobs using it now
	bad   bool // a job failed on it: closed when its last user is done
}

// NewHandles returns an empty pool; Close closes what it holds.
func NewHandles() *Handles {
	h := &Handles{open: map[string]*handle{}}
	h.free = sync.NewCond(&h.mu)
	return h
}

// Open opens the database at path (run.Open), or reuses the handle an
// earlier or running job of the same file opened with the same settings.
// The caller calls done with the job's error once the job is over: with a
// nil *Handles that closes the database, and otherwise a handle a job
// failed on is closed once no job uses it, so the next job opens the file
// afresh. done returns the error of a close, which for a database opened
// for writing can mean the commits its jobs left in the WAL were not
// checkpointed (they stay committed in the WAL, replayed by the next
// open). A handle kept across jobs checkpoints their commits once, when
// Close closes it at the end of the project run (run.DB.Close), not after
// each job. A job that wants other settings than the running jobs' waits
// for them: DuckDB opens a file once per process.
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
	for {
		o, ok := h.open[key]
		if !ok {
			break
		}
		if !o.bad && o.opts.Same(opts) {
			o.users++
			return o.db, h.release(key, o), nil
		}
		if o.users > 0 {
			h.free.Wait()
			continue
		}
		// Other settings, or a failed job's: DuckDB opens a file once
		// per process.
		closeErr = errors.Join(closeErr, closeDB(o.db))
		delete(h.open, key)
	}
	db, err = run.Open(ctx, path, opts)
	if err != nil {
		return nil, nil, errors.Join(err, closeErr)
	}
	if closeErr != nil {
		return nil, nil, errors.Join(closeErr, closeDB(db))
	}
	o := &handle{db: db, opts: opts, users: 1}
	h.open[key] = o
	return db, h.release(key, o), nil
}

func (h *Handles) release(key string, o *handle) func(error) error {
	return func(err error) error {
		h.mu.Lock()
		defer h.mu.Unlock()
		defer h.free.Broadcast()
		o.users--
		o.bad = o.bad || err != nil
		if !o.bad || o.users > 0 || h.open[key] != o {
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
