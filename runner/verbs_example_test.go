package runner_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/idem-dev/idem/runner"
)

// applied opens a project of sourceJob in a new temporary folder in which
// two batches were applied: snapshots 1 and 2. Without opts it is a copy
// of a folder made once (a copy of a database is the same database); with
// them the batches are applied under them. The caller removes dir.
func applied(ctx context.Context, opts ...runner.Option) (p *runner.Project, dir string) {
	if len(opts) > 0 {
		dir = applyTwo(ctx, opts...)
	} else {
		appliedOnce.Do(func() { appliedDir = applyTwo(ctx) })
		dir = tempDir()
		if err := os.CopyFS(dir, os.DirFS(appliedDir)); err != nil {
			log.Fatal(err)
		}
	}
	p, err := runner.Open(ctx, []string{filepath.Join(dir, "src.toml")}, opts...)
	if err != nil {
		log.Fatal(err)
	}
	return p, dir
}

// appliedDir is the folder applied copies, made once; TestMain removes it.
var (
	appliedOnce sync.Once
	appliedDir  string
)

// applyTwo writes sourceJob and two batches into a new temporary folder
// and applies them.
func applyTwo(ctx context.Context, opts ...runner.Option) string {
	dir := tempDir()
	writeFiles(dir, map[string]string{
		"src.toml":      sourceJob,
		"input/src.csv": "id,day\n1,2024-01-01\n2,2024-01-02\n",
		"input/b2.csv":  "id,day\n2,2024-02-02\n3,2024-02-03\n",
	})
	p, err := runner.Open(ctx, []string{filepath.Join(dir, "src.toml")}, opts...)
	if err != nil {
		log.Fatal(err)
	}
	for _, in := range []string{"input/src.csv", "input/b2.csv"} {
		if _, err := p.RunJob(ctx, "src", runner.Batch{Input: filepath.Join(dir, in)}); err != nil {
			log.Fatal(err)
		}
	}
	return dir
}

// tempDir is a new temporary folder.
func tempDir() string {
	dir, err := os.MkdirTemp("", "idem-example-")
	if err != nil {
		log.Fatal(err)
	}
	return dir
}

// TestMain removes the folder the examples copy once they ran.
func TestMain(m *testing.M) {
	code := m.Run()
	if appliedDir != "" {
		os.RemoveAll(appliedDir)
	}
	os.Exit(code)
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

// ExampleProject_Rollback makes the rows of snapshot 1 current again as
// snapshot 3: the run's sha256 of snapshot 1 is the new snapshot's.
func ExampleProject_Rollback() {
	ctx := context.Background()
	p, dir := applied(ctx)
	defer os.RemoveAll(dir)
	first, err := p.Show(ctx, "src", 1)
	if err != nil {
		log.Fatal(err)
	}
	parent := int64(2)
	res, err := p.Rollback(ctx, "src", runner.RollbackOptions{To: 1, ExpectParent: &parent})
	if err != nil {
		log.Fatal(err)
	}
	now, err := p.Show(ctx, "src", 0)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s: rolled back to %d as snapshot %d, %d rows\n", res.Job, res.To, res.Snapshot, res.RowsOut)
	fmt.Println("rows of snapshot 1:", now.Entries[0].SHA256 == first.Entries[0].SHA256)
	_, err = p.Rollback(ctx, "src", runner.RollbackOptions{To: 1, ExpectParent: &parent})
	fmt.Println("a stale parent is refused, exit", runner.ExitCode(err))
	// Output:
	// src: rolled back to 1 as snapshot 3, 2 rows
	// rows of snapshot 1: true
	// a stale parent is refused, exit 3
}

// ExampleProject_Expire keeps the newest snapshot only; a dry run first
// says what would go and changes nothing.
func ExampleProject_Expire() {
	ctx := context.Background()
	p, dir := applied(ctx)
	defer os.RemoveAll(dir)
	for _, dry := range []bool{true, false} {
		res, err := p.Expire(ctx, "src", runner.ExpireOptions{Keep: 1, DryRun: dry})
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("dry run %v: %d expired, oldest kept %d of %d\n", res.DryRun, res.Expired, res.OldestKept, res.Latest)
	}
	_, err := p.Show(ctx, "src", 1)
	fmt.Println("snapshot 1 is refused, exit", runner.ExitCode(err))
	// Output:
	// dry run true: 1 expired, oldest kept 2 of 2
	// dry run false: 1 expired, oldest kept 2 of 2
	// snapshot 1 is refused, exit 3
}

// ExampleWithAfterCommit plugs an extension in: after every commit the
// hook reads what it needs through the Project, as a publisher does (here
// the snapshot's sha256 and the job's [target] key); a run that commits
// nothing calls it too, with Committed false, to catch up.
func ExampleWithAfterCommit() {
	ctx := context.Background()
	publish := func(ctx context.Context, p *runner.Project, c runner.Commit) error {
		info, err := p.Job(c.Job)
		if err != nil {
			return err
		}
		if !c.Committed {
			fmt.Printf("%s: %s committed nothing new\n", c.Job, c.Verb)
			return nil
		}
		pk, err := p.Show(ctx, c.Job, c.Snapshot)
		if err != nil {
			return err
		}
		fmt.Printf("publish %s (key %v) snapshot %d after %s: %d rows\n", info.Target, info.Key, c.Snapshot, c.Verb, pk.Entries[0].Rows)
		return nil
	}
	p, dir := applied(ctx, runner.WithAfterCommit(publish))
	defer os.RemoveAll(dir)
	if _, err := p.RunJob(ctx, "src", runner.Batch{Input: filepath.Join(dir, "input/b2.csv")}); err != nil {
		log.Fatal(err)
	}
	if _, err := p.Rollback(ctx, "src", runner.RollbackOptions{To: 1}); err != nil {
		log.Fatal(err)
	}
	// Output:
	// publish src (key [id]) snapshot 1 after run: 2 rows
	// publish src (key [id]) snapshot 2 after run: 3 rows
	// src: run committed nothing new
	// publish src (key [id]) snapshot 3 after rollback: 2 rows
}

// ExampleProject_Audit measures what a day-bounded read of a partitioned
// Parquet export reads, beside a full scan of it.
func ExampleProject_Audit() {
	ctx := context.Background()
	p, dir := applied(ctx)
	defer os.RemoveAll(dir)
	out := filepath.Join(dir, "export")
	if _, err := p.Export(ctx, "src", runner.ExportOptions{Out: out, Format: "parquet", PartitionBy: "day"}); err != nil {
		log.Fatal(err)
	}
	res, err := p.Audit(ctx, "src", out, "day = DATE '2024-01-01'")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("audit: %d of %d files, %d rows; full scan: %d files, %d rows\n", res.Audit.Files, res.Audit.FilesTotal, res.Audit.Rows, res.Full.Files, res.Full.Rows)
	// Output:
	// audit: 1 of 3 files, 1 rows; full scan: 3 files, 3 rows
}

// ExampleTest runs a model's unit test ([[test]] in tests/*.toml): the
// model replays in a scratch database from the rows the test gives its
// upstream; the project's database is only read, for the committed types
// of columns the test's rows leave out.
func ExampleTest() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "idem-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	files := map[string]string{
		"src.toml":           sourceJob,
		"days.toml":          daysJob,
		"models/days/v1.sql": "SELECT day, count(*) AS ids FROM {{upstream:src}} WHERE idem_status = 'active' GROUP BY day\n",
		"tests/days.toml": `[[test]]
name = "ids per day"
model = "days"
[test.given.src]
rows = [ { id = 1, day = 2024-01-01 }, { id = 2, day = 2024-01-01 } ]
[test.expect]
rows = [ { day = 2024-01-01, ids = 2 } ]
`,
	}
	writeFiles(dir, files)
	rep, err := runner.Test(ctx, []string{dir}, func(r *runner.TestResult) {
		fmt.Println(r.Status, r.Name, "("+r.Model+")")
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%d passed, %d failed, exit %d\n", rep.Passed, rep.Failed, rep.ExitCode())
	// Output:
	// pass ids per day (days)
	// 1 passed, 0 failed, exit 0
}

// ExampleProject_Docs writes the project's documentation site, one
// index.html: the same project and databases give the same bytes.
func ExampleProject_Docs() {
	ctx := context.Background()
	p, dir := applied(ctx)
	defer os.RemoveAll(dir)
	var sums []string
	for _, out := range []string{"site", "again"} {
		res, err := p.Docs(ctx, dir, filepath.Join(dir, out))
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(filepath.Base(res.Index), res.Jobs, "not run:", res.NotRun)
		sums = append(sums, res.SHA256)
	}
	fmt.Println("same bytes:", sums[0] == sums[1])
	// Output:
	// index.html [src] not run: []
	// index.html [src] not run: []
	// same bytes: true
}

// ExampleDuckDBVersion names the DuckDB idem is built with.
func ExampleDuckDBVersion() {
	v, err := runner.DuckDBVersion(context.Background())
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(v)
	// Output:
	// v2.0.0
}

// writeFiles writes each file of files (path relative to dir: text).
func writeFiles(dir string, files map[string]string) {
	for name, text := range files {
		path := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			log.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			log.Fatal(err)
		}
	}
}

// ExampleInit writes a starting project: a refresh pipeline, its job file
// and a small input.
func ExampleInit() {
	dir, err := os.MkdirTemp("", "idem-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	written, err := runner.Init(dir, "stations", runner.ModeRefresh)
	if err != nil {
		log.Fatal(err)
	}
	for _, w := range written {
		rel, _ := filepath.Rel(dir, w)
		fmt.Println(filepath.ToSlash(rel))
	}
	_, err = runner.Init(dir, "stations", runner.ModeRefresh)
	fmt.Println("written again: exit", runner.ExitCode(err))
	// Output:
	// stations.toml
	// input/example.csv
	// stations/pipeline.toml
	// stations/schema/v1.sql
	// stations/transform/v1/01_stage.sql
	// stations/transform/v1/02_rank.sql
	// stations/transform/v1/03_outcomes.sql
	// stations/transform/v1/04_commit.sql
	// written again: exit 2
}

// ExampleLint checks a job file and its pipeline's SQL without running
// it; a job file that cannot be read is an error naming its line.
func ExampleLint() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "idem-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	writeFiles(dir, map[string]string{"src.toml": sourceJob, "bad.toml": sourceJob + "colour = \"red\"\n"})
	rep, err := runner.Lint(ctx, filepath.Join(dir, "src.toml"))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s (%s): %d error(s), %d warning(s)\n", rep.Job, rep.Pipeline, rep.Errors, rep.Warnings)
	_, err = runner.Lint(ctx, filepath.Join(dir, "bad.toml"))
	fmt.Println("bad.toml: exit", runner.ExitCode(err))
	// Output:
	// src (merge_by_key): 0 error(s), 0 warning(s)
	// bad.toml: exit 2
}

// ExampleProject_DU says where a job's bytes go, and what expiring its
// older snapshots would free.
func ExampleProject_DU() {
	ctx := context.Background()
	p, dir := applied(ctx)
	defer os.RemoveAll(dir)
	du, err := p.DU(ctx, "src")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s: snapshots %d-%d, target %d rows, %d retained input file(s)\n", du.Job, du.OldestKept, du.Latest, du.Rows.Target, du.InputFiles)
	for _, s := range du.Snapshots {
		fmt.Printf("expiring through %d frees %d input file(s)\n", s.Snapshot, s.Inputs)
	}
	// Output:
	// src: snapshots 1-2, target 3 rows, 2 retained input file(s)
	// expiring through 1 frees 0 input file(s)
}

// ExampleBackup copies a database and its retained inputs into a folder,
// and verifies the copy against its manifest.
func ExampleBackup() {
	ctx := context.Background()
	p, dir := applied(ctx)
	defer os.RemoveAll(dir)
	info, err := p.Job("src")
	if err != nil {
		log.Fatal(err)
	}
	out := filepath.Join(dir, "backup")
	res, err := runner.Backup(ctx, info.Database, out)
	if err != nil {
		log.Fatal(err)
	}
	ver, err := runner.VerifyBackup(ctx, out)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("verified the same commit:", ver.Commit == res.Commit, "files:", ver.Files == res.Files)
	// Output:
	// verified the same commit: true files: true
}

// ExampleCompact rewrites a database file after an expiry, checking that
// every job's latest export keeps its sha256.
func ExampleCompact() {
	ctx := context.Background()
	p, dir := applied(ctx)
	defer os.RemoveAll(dir)
	if _, err := p.Expire(ctx, "src", runner.ExpireOptions{Keep: 1}); err != nil {
		log.Fatal(err)
	}
	info, err := p.Job("src")
	if err != nil {
		log.Fatal(err)
	}
	res, err := runner.Compact(ctx, info.Database)
	if err != nil {
		log.Fatal(err)
	}
	pk, err := p.Show(ctx, "src", 0)
	if err != nil {
		log.Fatal(err)
	}
	for _, j := range res.Jobs {
		fmt.Println(j.Job, "snapshot", j.Snapshot, "rows", j.Rows, "same sha256 as its packet:", j.SHA256 == pk.Entries[0].SHA256)
	}
	// Output:
	// src snapshot 2 rows 3 same sha256 as its packet: true
}
