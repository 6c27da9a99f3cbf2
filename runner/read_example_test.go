package runner_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/idem-dev/idem/runner"
)

// ExampleProject_Diff compares a job's target at two snapshots by key, as
// idem diff JOB --from 1 --to 2 does: the second batch changed key 2 and
// added key 3.
func ExampleProject_Diff() {
	ctx := context.Background()
	p, dir := applied(ctx)
	defer os.RemoveAll(dir)
	d, err := p.Diff(ctx, "src", runner.DiffOptions{From: 1, To: 2})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s: %d -> %d rows, added %v, removed %v, changed %v\n", d.Table, d.From.Rows, d.To.Rows, d.AddedKeys, d.RemovedKeys, d.ChangedKeys)
	// Output:
	// src: 2 -> 3 rows, added [3], removed [], changed [2]
}

// ExampleDiffFiles compares two exports by their first column, as idem
// diff FILE1 FILE2 does; two exports of one snapshot are identical.
func ExampleDiffFiles() {
	ctx := context.Background()
	p, dir := applied(ctx)
	defer os.RemoveAll(dir)
	var files []string
	for _, s := range []int64{1, 2} {
		out := filepath.Join(dir, fmt.Sprintf("s%d.csv", s))
		if _, err := p.Export(ctx, "src", runner.ExportOptions{Out: out, Snapshot: s}); err != nil {
			log.Fatal(err)
		}
		files = append(files, out)
	}
	d, err := runner.DiffFiles(ctx, files[0], files[1], "", nil)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("key", d.Key, "identical:", d.Identical, "added", d.Added, "changed", d.Changed)
	// Output:
	// key [id] identical: false added 1 changed 1
}

// ExampleQuery runs one read-only statement against a job's database, as
// idem query does: values come as DuckDB's own text, with each column's
// kind for a typed output.
func ExampleQuery() {
	ctx := context.Background()
	p, dir := applied(ctx)
	defer os.RemoveAll(dir)
	info, err := p.Job("src")
	if err != nil {
		log.Fatal(err)
	}
	rows, err := runner.Query(ctx, info.Database, "SELECT id, day FROM src ORDER BY id")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(rows.Columns, rows.Kinds[0] == runner.KindNumber)
	for _, r := range rows.Values {
		fmt.Println(r...)
	}
	_, err = runner.Query(ctx, info.Database, "DELETE FROM src")
	fmt.Println("DELETE refused:", err != nil)
	// Output:
	// [id day] true
	// 1 2024-01-01
	// 2 2024-02-02
	// 3 2024-02-03
	// DELETE refused: true
}

// ExampleProject_RerunWith rebuilds snapshot 1 from the first, replaying
// its batch in a scratch database, and proves it has the stored bytes.
func ExampleProject_RerunWith() {
	ctx := context.Background()
	p, dir := applied(ctx)
	defer os.RemoveAll(dir)
	res, err := p.RerunWith(ctx, "src", runner.RerunOptions{Snapshot: 1, FromStart: true})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("snapshot", res.Snapshot, "reproduced:", res.AllReproduced(), "replayed", res.Replayed, "rows", res.Rows)
	// Output:
	// snapshot 1 reproduced: true replayed 1 rows 2
}

// ExampleWithEachJob prints each job of a project run as it is done, in
// run order, as idem run DIR does whatever --jobs, and each plan so.
func ExampleWithEachJob() {
	ctx := context.Background()
	_, dir := applied(ctx)
	defer os.RemoveAll(dir)
	p, err := runner.Open(ctx, []string{dir}, runner.WithoutSHA256(),
		runner.WithEachJob(func(r *runner.Result, err error) { fmt.Println("run", r.Job, r.Decision, err) }),
		runner.WithEachPlan(func(pl *runner.Plan, err error) { fmt.Println("plan", pl.Job, pl.Decision, err) }))
	if err != nil {
		log.Fatal(err)
	}
	if _, err := p.Plan(ctx); err != nil {
		log.Fatal(err)
	}
	if _, err := p.Run(ctx); err != nil {
		log.Fatal(err)
	}
	// Output:
	// plan src already_committed <nil>
	// run src already_committed <nil>
}
