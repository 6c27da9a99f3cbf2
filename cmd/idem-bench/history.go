package main

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"time"

	"github.com/idem-dev/idem/internal/catalog"
)

// history measures what keeping history costs: the apply case's batch run
// by idem as usual against the same run with IDEM_BENCH_NO_HISTORY=1 (no
// history row written) and against the hand-written floor without its
// history statements (child apply --no-history), each from a fresh copy of
// the prepared database, the three in a rotating order within each
// repetition. It then times the reads that history serves on the database
// the last run left: export --snapshot 1 (a pinned read) against export of
// the latest snapshot (the target), and the rows that changed between
// snapshots 1 and 2 (catalog.ChangesSelect, as a downstream apply reads
// them).
func (b *bench) history(ctx context.Context) error {
	dir, job, prepared, batch, err := b.prepareApply(ctx)
	if err != nil {
		return err
	}
	r := &row{name: "apply with history", n: b.n, limit: "none", floorName: "idem writing no history (IDEM_BENCH_NO_HISTORY=1)"}
	h := &row{name: "apply with history", n: b.n, limit: "none", floorName: "hand-written SQL without history (floor_apply.sql, history left out)"}
	idemDB := filepath.Join(dir, "hist-idem.duckdb")
	noHistDB := filepath.Join(dir, "hist-nohist.duckdb")
	floorDB := filepath.Join(dir, "hist-floor.duckdb")
	fresh := func(env []string, db, bin string, args ...string) (measure, error) {
		removeDB(db)
		if err := copyFile(prepared, db); err != nil {
			return measure{}, err
		}
		return runChildEnv(ctx, env, "", bin, append(append([]string{}, args...), "--db", db)...)
	}
	runArgs := []string{"run", job, "--input", batch, "--batch-id", "batch-2", "--quiet"}
	runs := []struct {
		what string
		run  func() (measure, error)
		to   *[]measure
	}{
		{"idem", func() (measure, error) {
			return fresh(nil, idemDB, b.idem, runArgs...)
		}, &r.idem},
		{"idem, no history", func() (measure, error) {
			return fresh([]string{"IDEM_BENCH_NO_HISTORY=1"}, noHistDB, b.idem, runArgs...)
		}, &r.floor},
		{"hand-written, no history", func() (measure, error) {
			return fresh(nil, floorDB, b.self, "child", "apply", "--no-history", "--input", batch, "--batch-id", "batch-2")
		}, &h.floor},
	}
	logf("history N=%d: apply with and without history", b.n)
	for rep := 0; rep < b.reps; rep++ {
		for i := range runs {
			x := runs[(i+rep)%len(runs)]
			runtime.GC()
			m, err := x.run()
			if err != nil {
				return fmt.Errorf("%s: %w", x.what, err)
			}
			*x.to = append(*x.to, m)
			logf("  rep %d %-25s %8.3fs  cpu %8.3fs  rss %s", rep+1, x.what, m.wall.Seconds(), m.cpu.Seconds(), human(m.rss))
		}
	}
	h.idem = r.idem
	b.rows = append(b.rows, *r, *h)
	for _, db := range []string{noHistDB, floorDB} {
		if err := compare(ctx, idemDB, db, []struct{ what, q string }{
			{"target", "SELECT * FROM changes"},
			{"outcomes", "SELECT * FROM changes_outcomes"},
		}); err != nil {
			return err
		}
		removeDB(db)
	}

	out := filepath.Join(dir, "hist-export.csv")
	export := func(snapshot string) func(int) (measure, error) {
		return func(int) (measure, error) {
			os.Remove(out)
			args := []string{"export", job, "--db", idemDB, "--out", out, "--format", "csv", "--quiet"}
			if snapshot != "" {
				args = append(args, "--snapshot", snapshot)
			}
			return runChild(ctx, "", b.idem, args...)
		}
	}
	p := &row{name: "export --snapshot 1 (pinned)", n: b.n, limit: "none", floorName: "export of the latest snapshot (the target)"}
	logf("history N=%d: pinned export", b.n)
	if err := b.pair(ctx, p, export("1"), export("")); err != nil {
		return err
	}
	c := &row{name: "changes 1-2 (ChangesSelect)", n: b.n, limit: "none"}
	for i := 0; i < b.reps; i++ {
		m, err := runChild(ctx, "", b.self, "child", "changes", "--db", idemDB)
		if err != nil {
			return err
		}
		logf("  rep %d changes %8.3fs", i+1, m.wall.Seconds())
		c.idem = append(c.idem, m)
	}
	b.rows = append(b.rows, *c)
	removeDB(idemDB)
	os.Remove(out)
	return nil
}

// changesChild reads every row of catalog.ChangesSelect of the bench job
// between snapshots 1 and 2 and prints their count and time.
func changesChild(ctx context.Context, db *sql.DB) error {
	cols, err := catalog.TargetColumns(ctx, db, "changes")
	if err != nil {
		return err
	}
	q, err := catalog.ChangesSelect(ctx, db, "bench_changes", cols, []string{"entity_id"}, 1, 2)
	if err != nil {
		return err
	}
	start := time.Now()
	fp, err := fingerprint(ctx, db, q)
	if err != nil {
		return err
	}
	fmt.Printf("%s in %.3fs\n", fp, time.Since(start).Seconds())
	return nil
}
