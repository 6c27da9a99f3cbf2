package clitest

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idem-dev/idem/internal/export"
	"github.com/idem-dev/idem/internal/job"
	"github.com/idem-dev/idem/internal/run"
	"github.com/idem-dev/idem/pipelines"
)

// UpdateSnapshotGolden is the -update flag: golden files are rewritten
// from what the tests got instead of compared.
var UpdateSnapshotGolden = flag.Bool("update", false, "rewrite golden files")

// SnapEnv is one test's database and the job files it runs, called through
// Main in-process, as the CLI runs them.
type SnapEnv struct {
	t    *testing.T
	Dir  string
	DB   string
	Root string // the repository root: configs/ and fixtures/
}

// Config is the path of an example job file.
func (e *SnapEnv) Config(name string) string { return filepath.Join(e.Root, "configs", name+".toml") }

// Fixture is the path of a checked-in input file.
func (e *SnapEnv) Fixture(rel string) string { return filepath.Join(e.Root, "fixtures", rel) }

// Idem runs the CLI with args; --db is added after the command's job
// argument unless the command is diff FILE FILE, and --threads 1
// (TestThreads) to a command that takes it unless args set it.
func (e *SnapEnv) Idem(args ...string) CLIOut {
	e.t.Helper()
	full := append([]string{}, args...)
	if len(args) > 1 && !strings.HasSuffix(args[1], ".csv") && !strings.HasSuffix(args[1], ".parquet") && !strings.HasSuffix(args[1], ".jsonl") {
		full = append(full, "--db", e.DB)
	}
	if takesThreads(args) && !slices.Contains(args, "--threads") {
		full = append(full, "--threads", TestThreads)
	}
	code, stdout, stderr := InProcess(e.t, full...)
	return CLIOut{Stdout: stdout, Stderr: stderr, Code: code}
}

// Ok runs the CLI with --json, requires exit 0 and decodes stdout into v.
func (e *SnapEnv) Ok(v any, args ...string) {
	e.t.Helper()
	res := e.Idem(append(args, "--json")...)
	require.Equal(e.t, 0, res.Code, "idem %s\nstdout: %s\nstderr: %s", strings.Join(args, " "), res.Stdout, res.Stderr)
	if v != nil {
		require.NoError(e.t, json.Unmarshal([]byte(res.Stdout), v), res.Stdout)
	}
}

// apply runs one orders batch from fixtures/orders.
func (e *SnapEnv) Orders(file string, extra ...string) *run.Result {
	e.t.Helper()
	var res run.Result
	e.Ok(&res, append([]string{"run", e.Config("orders"), "--input", e.Fixture("orders/" + file)}, extra...)...)
	return &res
}

// OrdersDays loads the fixture sequence up to and including the day-52
// correction: snapshots 1 (day 47), 2 (day 48), 3 (late correction). Into a
// new env it copies a database made so once per package run.
func (e *SnapEnv) OrdersDays() {
	e.t.Helper()
	if _, err := os.Stat(e.DB); os.IsNotExist(err) {
		CopyDir(e.t, ordersDaysFixture.Get(e.t, func(t *testing.T) string {
			f := NewSnapEnv(t)
			f.runOrdersDays()
			dir := FixtureDir(t, "orders-days")
			CopyDir(t, f.Dir, dir)
			return dir
		}), e.Dir)
		return
	}
	e.runOrdersDays()
}

func (e *SnapEnv) runOrdersDays() {
	e.t.Helper()
	for _, f := range []string{"day-47.jsonl", "day-48.jsonl", "day-52-correction.jsonl"} {
		e.Orders(f)
	}
}

// Export writes a pinned export and returns its report and bytes.
func (e *SnapEnv) Export(job string, args ...string) (*export.Result, []byte) {
	e.t.Helper()
	out := filepath.Join(e.Dir, "export-"+strings.NewReplacer("/", "_", " ", "_", "-", "").Replace(strings.Join(args, "_")))
	hasOut := false
	for _, a := range args {
		if a == "--out" {
			hasOut = true
		}
	}
	if !hasOut {
		format := "csv"
		for i, a := range args {
			if a == "--format" && i+1 < len(args) {
				format = args[i+1]
			}
		}
		out += "." + format
		args = append(args, "--out", out)
	}
	var res export.Result
	e.Ok(&res, append([]string{"export", e.Config(job)}, args...)...)
	data, err := os.ReadFile(res.Path)
	if err != nil {
		return &res, nil // a partitioned export's path is a folder
	}
	return &res, data
}

// NewSnapEnv is an empty folder with its database path, for the
// examples' job files and fixtures of the repository.
func NewSnapEnv(t *testing.T) *SnapEnv {
	t.Helper()
	dir := t.TempDir()
	return &SnapEnv{t: t, Dir: dir, DB: filepath.Join(dir, "idem.duckdb"), Root: RepoRoot(t)}
}

// CLIOut is what one in-process idem command returned.
type CLIOut struct {
	Stdout, Stderr string
	Code           int
}

// takesThreads reports whether the idem command of args has a --threads
// flag.
func takesThreads(args []string) bool {
	return under.HasFlag(args, "threads")
}

var ordersDaysFixture Once[string]

// ExportSnapshots exports snapshots 1..latest of table ("" for the target)
// of the job in jobFile to CSV through one read-only open of the database
// at dbPath, as `idem export JOB --snapshot S --table T` does one at a time,
// and returns each export's report and bytes by snapshot. Tests that read
// every snapshot use it: the CLI's export itself is the export tests'.
func ExportSnapshots(t *testing.T, dbPath, jobFile, table string, latest int64) (map[int64]*export.Result, map[int64][]byte) {
	t.Helper()
	j, err := run.LoadJob(jobFile, pipelines.FS)
	require.NoError(t, err)
	ctx := context.Background()
	db, err := run.Open(ctx, dbPath, run.OpenOptions{ReadOnly: true, DuckDB: job.DuckDBSettings{Threads: 1}})
	require.NoError(t, err)
	defer db.Close()
	dir := t.TempDir()
	results, data := map[int64]*export.Result{}, map[int64][]byte{}
	for s := int64(1); s <= latest; s++ {
		res, err := export.Export(ctx, db, j, export.Options{Table: table, Snapshot: s, Format: job.FormatCSV,
			Out: filepath.Join(dir, fmt.Sprintf("%s-%d.csv", table, s))})
		require.NoError(t, err, "export snapshot %d of %s", s, table)
		b, err := os.ReadFile(res.Path)
		require.NoError(t, err)
		results[s], data[s] = res, b
	}
	return results, data
}

// golden compares got with testdata/name, rewriting it with -update.
func SnapGolden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *UpdateSnapshotGolden {
		require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
		require.NoError(t, os.WriteFile(path, got, 0o644))
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err, "golden file missing: run go test ./cmd/idem/cli -run %s -update", t.Name())
	require.Equal(t, string(want), string(got), "differs from golden %s (rewrite with -update)", path)
}

// StoreHolds reports the retained input files whose bytes contain s.
func StoreHolds(t *testing.T, db, s string) []string {
	t.Helper()
	var hits []string
	err := filepath.WalkDir(db+".inputs", func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if bytes.Contains(data, []byte(s)) {
			hits = append(hits, path)
		}
		return nil
	})
	require.NoError(t, err)
	return hits
}
