package run

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"sync"

	"github.com/idem-dev/idem/internal/job"
)

// Adaptive threads. DuckDB's threads setting belongs to the database
// instance, and its worker threads cost CPU even when a statement has
// little to do: the calling thread spins in the pending-query loop while a
// worker runs the task (docs/benchmarks.md, "Where idem's CPU goes": about
// 1.3 s of a 4.9 s nightly of the project case, where --threads 1 saved
// 18-30% of the CPU and no wall time on 2 cores). So a writable handle
// opened without a threads setting (DuckDB's default: the cores) runs the
// runs whose data is small on one thread, and the others on the default.
// A threads setting the user gave is kept as given.
//
// Output bytes do not depend on this: the steps of a model not proven
// order-free run on one thread anyway (singleThread), and the others give
// the same bytes at any thread count. Setting threads restarts DuckDB's
// workers (a few ms), so the handle changes it only when a run needs the
// other setting: a project of small jobs sets it once per process.

// smallRows and smallBytes bound a run that runs on one thread: the rows
// of its own target and of its upstreams' targets (DuckDB's estimate), and
// the bytes of its input files. The project case's largest run reads
// 163,000 rows; a scan of a million rows takes a few tens of ms on one
// core, where a second thread gains little and its spinning costs.
const (
	smallRows  = 1_000_000
	smallBytes = 64 << 20
)

// adaptiveThreads is the threads state of a handle opened without a
// threads setting; nil for any other handle (read-only, or threads set).
type adaptiveThreads struct {
	// rows and bytes bound a small run (smallRows, smallBytes).
	rows, bytes int64
	mu          sync.Mutex
	// wide is DuckDB's default threads as the handle opened ("" until the
	// first run lowers it); one is true while threads is 1.
	wide string
	one  bool
}

// fitThreads sets the handle's threads for a run of j that writes: 1 when
// the run's data is small (smallRows, smallBytes), DuckDB's default
// otherwise. It is called inside the run's transaction before the run
// reads its upstreams' rows. A handle with a threads setting is left as
// it is.
func (d *DB) fitThreads(ctx context.Context, tx *sql.Tx, j *job.Job, p *Prepared) error {
	a := d.threads
	if a == nil {
		return nil
	}
	small, err := smallRun(ctx, tx, j, p, a.rows, a.bytes)
	if err != nil {
		return err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if small == a.one {
		return nil
	}
	if a.wide == "" {
		if err := tx.QueryRowContext(ctx, "SELECT current_setting('threads')").Scan(&a.wide); err != nil {
			return fmt.Errorf("read threads: %w", err)
		}
	}
	set := "SET threads = 1"
	if !small {
		set = "SET threads = " + job.SQLString(a.wide)
	}
	if _, err := tx.ExecContext(ctx, set); err != nil {
		return fmt.Errorf("set threads: %w", err)
	}
	a.one = small
	return nil
}

// smallRun reports whether a run of j reads little: its input files and
// the rows of its own target and its upstreams' targets under maxBytes
// and maxRows. An input of unknown size (a stream, a chunk) is not small.
func smallRun(ctx context.Context, tx *sql.Tx, j *job.Job, p *Prepared, maxRows, maxBytes int64) (bool, error) {
	var bytes int64
	switch {
	case len(p.files) > 0:
		for _, f := range p.files {
			bytes += f.Size
		}
	case len(j.Input.Upstream) == 0:
		return false, nil
	}
	if bytes >= maxBytes {
		return false, nil
	}
	names := append([]string{j.Name}, j.Input.Upstream...)
	var rows int64
	if err := tx.QueryRowContext(ctx, `SELECT coalesce(sum(t.estimated_size), 0)::BIGINT FROM duckdb_tables() t
		WHERE t.database_name = current_database() AND t.schema_name = 'main'
		AND lower(t.table_name) IN (SELECT lower(target) FROM idem.jobs WHERE list_contains(string_split(?, chr(0)), job))`,
		strings.Join(names, "\x00")).Scan(&rows); err != nil {
		return false, fmt.Errorf("estimate the rows of %s: %w", j.Name, err)
	}
	return rows < maxRows, nil
}
