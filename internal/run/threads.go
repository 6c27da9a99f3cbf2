package run

import (
	"context"
	"database/sql"
	"fmt"
	"sync"

	"github.com/idem-dev/idem/internal/job"
	"github.com/idem-dev/idem/internal/sqltext"
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
	// targets are the rows of each job's target, by job name (small).
	targets map[string]int64
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
	a.mu.Lock()
	defer a.mu.Unlock()
	small, err := a.small(ctx, tx, j, p)
	if err != nil {
		return err
	}
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
		set = "SET threads = " + sqltext.SQLString(a.wide)
	}
	if _, err := tx.ExecContext(ctx, set); err != nil {
		return fmt.Errorf("set threads: %w", err)
	}
	a.one = small
	return nil
}

// small reports whether a run of j reads little: its input files under
// a.bytes, and the rows of its own target and its upstreams' targets
// under a.rows. An input of unknown size (a stream, a chunk) is not
// small. The targets' rows are DuckDB's estimates as the handle's first
// run found them (one look at the catalog per handle, not per run): the
// setting decides no output, and a target that grows within the process
// grows from input files counted here.
func (a *adaptiveThreads) small(ctx context.Context, tx *sql.Tx, j *job.Job, p *Prepared) (bool, error) {
	var bytes int64
	switch {
	case len(p.files) > 0:
		for _, f := range p.files {
			bytes += f.Size
		}
	case len(j.Input.Upstream) == 0:
		return false, nil
	}
	if bytes >= a.bytes {
		return false, nil
	}
	if a.targets == nil {
		a.targets = map[string]int64{}
		rows, err := tx.QueryContext(ctx, `SELECT j.job, t.estimated_size FROM idem.jobs j JOIN duckdb_tables() t
			ON lower(t.table_name) = lower(j.target) AND t.database_name = current_database() AND t.schema_name = 'main'`)
		if err != nil {
			return false, fmt.Errorf("estimate the rows of the targets: %w", err)
		}
		defer rows.Close()
		for rows.Next() {
			var name string
			var n int64
			if err := rows.Scan(&name, &n); err != nil {
				return false, fmt.Errorf("estimate the rows of the targets: %w", err)
			}
			a.targets[name] = n
		}
		if err := rows.Err(); err != nil {
			return false, fmt.Errorf("estimate the rows of the targets: %w", err)
		}
	}
	n := a.targets[j.Name]
	for _, u := range j.Input.Upstream {
		n += a.targets[u]
	}
	return n < a.rows, nil
}
