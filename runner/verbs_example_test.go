package runner_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/idem-dev/idem/runner"
)

// applied opens a project of sourceJob in a new temporary folder and
// applies two batches: snapshots 1 and 2. The caller removes dir.
func applied(ctx context.Context, opts ...runner.Option) (p *runner.Project, dir string) {
	dir, err := os.MkdirTemp("", "idem-example-")
	if err != nil {
		log.Fatal(err)
	}
	files := map[string]string{
		"src.toml":      sourceJob,
		"input/src.csv": "id,day\n1,2024-01-01\n2,2024-01-02\n",
		"input/b2.csv":  "id,day\n2,2024-02-02\n3,2024-02-03\n",
	}
	for name, text := range files {
		path := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			log.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			log.Fatal(err)
		}
	}
	if p, err = runner.Open(ctx, []string{filepath.Join(dir, "src.toml")}, opts...); err != nil {
		log.Fatal(err)
	}
	for _, in := range []string{"input/src.csv", "input/b2.csv"} {
		if _, err := p.RunJob(ctx, "src", runner.Batch{Input: filepath.Join(dir, in)}); err != nil {
			log.Fatal(err)
		}
	}
	return p, dir
}

// ExampleProject_Log lists a job's runs, newest first, as idem log does:
// a batch given again with the same content is logged as
// already_committed, with the snapshot that holds it.
func ExampleProject_Log() {
	ctx := context.Background()
	p, dir := applied(ctx)
	defer os.RemoveAll(dir)
	if _, err := p.RunJob(ctx, "src", runner.Batch{Input: filepath.Join(dir, "input/src.csv")}); err != nil {
		log.Fatal(err)
	}
	entries, err := p.Log(ctx, "src")
	if err != nil {
		log.Fatal(err)
	}
	for _, e := range entries {
		fmt.Println(*e.BatchID, e.Decision, "snapshot", e.Snapshot, "first load:", e.FirstLoad)
	}
	// Output:
	// src.csv already_committed snapshot 1 first load: false
	// b2.csv applied snapshot 2 first load: false
	// src.csv applied snapshot 1 first load: true
}

// ExampleProject_Show reads the release packet of a snapshot: what its run
// committed, with the sha256 of its rows as idem export --format csv
// writes them, the sha256 the run's Result named.
func ExampleProject_Show() {
	ctx := context.Background()
	p, dir := applied(ctx)
	defer os.RemoveAll(dir)
	res, err := p.RunJob(ctx, "src", runner.Batch{Input: filepath.Join(dir, "input/b2.csv"), ID: "b3"})
	if err != nil {
		log.Fatal(err)
	}
	pk, err := p.Show(ctx, "src", 0)
	if err != nil {
		log.Fatal(err)
	}
	e := pk.Entries[0]
	fmt.Printf("snapshot %d (parent %d): %d rows in, %d rows, %d distinct keys\n", pk.Snapshot, pk.Parent, pk.RowsIn, e.Rows, e.DistinctKeys)
	fmt.Println("same sha256 as the run's result:", e.SHA256 == res.SHA256)
	// Output:
	// snapshot 3 (parent 2): 2 rows in, 3 rows, 3 distinct keys
	// same sha256 as the run's result: true
}

// ExampleProject_Fence advances a job's writer epoch: a run given the old
// epoch is refused from then on, and commits nothing.
func ExampleProject_Fence() {
	ctx := context.Background()
	p, dir := applied(ctx)
	defer os.RemoveAll(dir)
	f, err := p.Fence(ctx, "src")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(f.Job, "epoch", f.Epoch)
	old := f.Epoch - 1
	_, err = p.RunJob(ctx, "src", runner.Batch{Input: filepath.Join(dir, "input/b2.csv"), ID: "b3", Epoch: &old})
	fmt.Println("refused, exit", runner.ExitCode(err))
	// Output:
	// src epoch 2
	// refused, exit 3
}
