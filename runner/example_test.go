package runner_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log"
	"os"
	"path/filepath"

	"github.com/idem-dev/idem/runner"
)

// Example opens the example project configs/trips/ (a copy in a temporary
// folder: its jobs write data/chain.duckdb beside configs/), runs it twice,
// proves the latest snapshot of trips_daily reproduces from its retained
// inputs, and exports it.
func Example() {
	ctx := context.Background()
	dir := copyExample()
	defer os.RemoveAll(dir)

	p, err := runner.Open(ctx, []string{filepath.Join(dir, "configs", "trips")}, runner.WithThreads(1))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("jobs:", p.Jobs())
	var loaded *runner.Result // trips_daily's first run
	for range 2 {
		results, err := p.Run(ctx)
		if err != nil {
			log.Fatalf("exit %d: %v", runner.ExitCode(err), err)
		}
		for _, r := range results {
			if r.Job == "trips_daily" && loaded == nil {
				loaded = r
			}
			fmt.Printf("  %s: %s", r.Job, r.Decision)
			for _, b := range r.Runs { // a files-mode job: one run per new file
				fmt.Printf(" [%s: snapshot %d]", b.BatchID, b.Snapshot)
			}
			fmt.Println()
		}
	}

	re, err := p.Rerun(ctx, "trips_daily", 0)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("rerun: snapshot %d reproduced=%v, %d rows\n", re.Snapshot, re.Reproduced, re.Rows)

	ex, err := p.Export(ctx, "trips_daily", runner.ExportOptions{Out: filepath.Join(dir, "trips_daily.csv")})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("export: snapshot %d, %d rows, same sha256 as the rerun: %v\n", ex.Snapshot, ex.Rows, ex.SHA256 == re.SHA256)
	fmt.Println("the run's result named that sha256:", loaded.SHA256 == ex.SHA256)

	// A batch already committed with other content is refused.
	other := filepath.Join(dir, "fixtures", "landing", "2026-01-02.jsonl")
	_, err = p.RunJob(ctx, "zones", runner.Batch{Input: other, ID: "zones.csv"})
	fmt.Println("refused:", errors.Is(err, runner.ErrRefused), "exit", runner.ExitCode(err))

	// Output:
	// jobs: [trips zones trips_clean trips_daily]
	//   trips: applied [2026-01-01.jsonl: snapshot 1] [2026-01-02.jsonl: snapshot 2]
	//   zones: applied
	//   trips_clean: loaded
	//   trips_daily: loaded
	//   trips: skipped
	//   zones: already_committed
	//   trips_clean: skipped
	//   trips_daily: skipped
	// rerun: snapshot 1 reproduced=true, 7 rows
	// export: snapshot 1, 7 rows, same sha256 as the rerun: true
	// the run's result named that sha256: true
	// refused: true exit 3
}

// ExampleProject_PlanJob plans one job of a project without writing: the
// plan of a job that has not run yet is its first load.
func ExampleProject_PlanJob() {
	ctx := context.Background()
	dir := copyExample()
	defer os.RemoveAll(dir)

	p, err := runner.Open(ctx, []string{filepath.Join(dir, "configs", "trips", "zones.toml")})
	if err != nil {
		log.Fatal(err)
	}
	plan, err := p.PlanJob(ctx, "zones", runner.Batch{})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(plan.Job, plan.Decision, "first load:", plan.FirstLoad)

	_, err = p.PlanJob(ctx, "zones", runner.Batch{From: new(int64)})
	fmt.Println("usage:", errors.Is(err, runner.ErrUsage), "exit", runner.ExitCode(err))

	// Output:
	// zones applied first load: true
	// usage: true exit 2
}

// copyExample copies configs/trips/ and the fixtures it reads into a new
// temporary folder, keeping their places relative to each other.
func copyExample() string {
	dir, err := os.MkdirTemp("", "idem-example-")
	if err != nil {
		log.Fatal(err)
	}
	for _, sub := range []string{"configs/trips", "fixtures/landing", "fixtures/zones.csv"} {
		src := filepath.Join("..", sub)
		err := filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			rel, err := filepath.Rel("..", path)
			if err != nil {
				return err
			}
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			dst := filepath.Join(dir, rel)
			if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
				return err
			}
			return os.WriteFile(dst, b, 0o644)
		})
		if err != nil {
			log.Fatal(err)
		}
	}
	return dir
}
