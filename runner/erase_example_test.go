package runner_test

import (
	"context"
	"fmt"
	"log"
	"maps"
	"os"
	"path/filepath"
	"slices"

	"github.com/idem-dev/idem/runner"
)

// ExampleErase removes a key from a job, as idem erase does: a dry run
// says what the erasure would change and commits nothing; the erasure
// removes the key's rows from the target, every snapshot's history and
// the retained inputs, commits a new snapshot and compacts the database
// file, so that no byte of the key is left in it.
func ExampleErase() {
	ctx := context.Background()
	_, dir := applied(ctx)
	defer os.RemoveAll(dir)
	job := filepath.Join(dir, "src.toml")
	dry, err := runner.Erase(ctx, job, runner.EraseOptions{Key: []string{"2"}, DryRun: true})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("dry run changes:", dry.Changed(), "- would remove", dry.Root().Removed["src"], "row(s) from src")
	res, err := runner.Erase(ctx, job, runner.EraseOptions{Key: []string{"2"}})
	if err != nil {
		log.Fatal(err)
	}
	r := res.Root()
	fmt.Printf("%s: erased key %s in snapshot %d (parent %d)\n", r.Job, r.Key, r.Snapshot, r.Parent)
	fmt.Println("tables:", slices.Sorted(maps.Keys(r.Removed)), "inputs rewritten:", len(r.Inputs))
	fmt.Println("compacted:", res.Compact != nil)
	again, err := runner.Erase(ctx, job, runner.EraseOptions{Key: []string{"2"}})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("again: already erased:", again.Root().AlreadyErased, "changed:", again.Changed())
	// Output:
	// dry run changes: false - would remove 1 row(s) from src
	// src: erased key 2 in snapshot 3 (parent 2)
	// tables: [history src src_outcomes] inputs rewritten: 2
	// compacted: true
	// again: already erased: true changed: false
}
