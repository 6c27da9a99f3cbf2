package main

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

	"github.com/idem-dev/idem/internal/job"
	"github.com/idem-dev/idem/internal/ops"
	"github.com/idem-dev/idem/internal/run"
)

var updateSnapshotGolden = flag.Bool("update", false, "rewrite golden files")

// snapEnv is one test's database and the job files it runs, called through
// Main in-process, as the CLI runs them.
type snapEnv struct {
	t    *testing.T
	dir  string
	db   string
	root string // the repository root: configs/ and fixtures/
}

func newSnapEnv(t *testing.T) *snapEnv {
	t.Helper()
	root, err := filepath.Abs("../..")
	require.NoError(t, err)
	dir := t.TempDir()
	return &snapEnv{t: t, dir: dir, db: filepath.Join(dir, "idem.duckdb"), root: root}
}

// config is the path of an example job file.
func (e *snapEnv) config(name string) string { return filepath.Join(e.root, "configs", name+".toml") }

// fixture is the path of a checked-in input file.
func (e *snapEnv) fixture(rel string) string { return filepath.Join(e.root, "fixtures", rel) }

type cliOut struct {
	stdout, stderr string
	code           int
}

// idem runs the CLI with args; --db is added after the command's job
// argument unless the command is diff FILE FILE, and --threads 1
// (testThreads) to a command that takes it unless args set it.
func (e *snapEnv) idem(args ...string) cliOut {
	e.t.Helper()
	full := append([]string{}, args...)
	if len(args) > 1 && !strings.HasSuffix(args[1], ".csv") && !strings.HasSuffix(args[1], ".parquet") && !strings.HasSuffix(args[1], ".jsonl") {
		full = append(full, "--db", e.db)
	}
	if takesThreads(args) && !slices.Contains(args, "--threads") {
		full = append(full, "--threads", testThreads)
	}
	code, stdout, stderr := cli(e.t, full...)
	return cliOut{stdout: stdout, stderr: stderr, code: code}
}

// takesThreads reports whether the idem command of args has a --threads
// flag.
func takesThreads(args []string) bool {
	cmd, _, err := (&app{}).newRootCmd().Find(args)
	return err == nil && cmd.Flags().Lookup("threads") != nil
}

// ok runs the CLI with --json, requires exit 0 and decodes stdout into v.
func (e *snapEnv) ok(v any, args ...string) {
	e.t.Helper()
	res := e.idem(append(args, "--json")...)
	require.Equal(e.t, 0, res.code, "idem %s\nstdout: %s\nstderr: %s", strings.Join(args, " "), res.stdout, res.stderr)
	if v != nil {
		require.NoError(e.t, json.Unmarshal([]byte(res.stdout), v), res.stdout)
	}
}

// apply runs one orders batch from fixtures/orders.
func (e *snapEnv) orders(file string, extra ...string) *run.Result {
	e.t.Helper()
	var res run.Result
	e.ok(&res, append([]string{"run", e.config("orders"), "--input", e.fixture("orders/" + file)}, extra...)...)
	return &res
}

// ordersDays loads the fixture sequence up to and including the day-52
// correction: snapshots 1 (day 47), 2 (day 48), 3 (late correction). Into a
// new env it copies a database made so once per package run.
func (e *snapEnv) ordersDays() {
	e.t.Helper()
	if _, err := os.Stat(e.db); os.IsNotExist(err) {
		copyDir(e.t, ordersDaysFixture.get(e.t, func(t *testing.T) string {
			f := newSnapEnv(t)
			f.runOrdersDays()
			dir := fixtureDir(t, "orders-days")
			copyDir(t, f.dir, dir)
			return dir
		}), e.dir)
		return
	}
	e.runOrdersDays()
}

var ordersDaysFixture once[string]

func (e *snapEnv) runOrdersDays() {
	e.t.Helper()
	for _, f := range []string{"day-47.jsonl", "day-48.jsonl", "day-52-correction.jsonl"} {
		e.orders(f)
	}
}

// export writes a pinned export and returns its report and bytes.
func (e *snapEnv) export(job string, args ...string) (*ops.ExportResult, []byte) {
	e.t.Helper()
	out := filepath.Join(e.dir, "export-"+strings.NewReplacer("/", "_", " ", "_", "-", "").Replace(strings.Join(args, "_")))
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
	var res ops.ExportResult
	e.ok(&res, append([]string{"export", e.config(job)}, args...)...)
	data, err := os.ReadFile(res.Path)
	if err != nil {
		return &res, nil // a partitioned export's path is a folder
	}
	return &res, data
}

// exportSnapshots exports snapshots 1..latest of table ("" for the target)
// of the job in jobFile to CSV through one read-only open of the database
// at dbPath, as `idem export JOB --snapshot S --table T` does one at a time,
// and returns each export's report and bytes by snapshot. Tests that read
// every snapshot use it: the CLI's export itself is the export tests'.
func exportSnapshots(t *testing.T, dbPath, jobFile, table string, latest int64) (map[int64]*ops.ExportResult, map[int64][]byte) {
	t.Helper()
	j, err := loadJob(jobFile)
	require.NoError(t, err)
	ctx := context.Background()
	db, err := run.Open(ctx, dbPath, run.OpenOptions{ReadOnly: true, DuckDB: job.DuckDBSettings{Threads: 1}})
	require.NoError(t, err)
	defer db.Close()
	dir := t.TempDir()
	results, data := map[int64]*ops.ExportResult{}, map[int64][]byte{}
	for s := int64(1); s <= latest; s++ {
		res, err := ops.Export(ctx, db, j, ops.ExportOptions{Table: table, Snapshot: s, Format: job.FormatCSV,
			Out: filepath.Join(dir, fmt.Sprintf("%s-%d.csv", table, s))})
		require.NoError(t, err, "export snapshot %d of %s", s, table)
		b, err := os.ReadFile(res.Path)
		require.NoError(t, err)
		results[s], data[s] = res, b
	}
	return results, data
}

// golden compares got with testdata/name, rewriting it with -update.
func snapGolden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *updateSnapshotGolden {
		require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
		require.NoError(t, os.WriteFile(path, got, 0o644))
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err, "golden file missing: run go test ./cmd/idem -run %s -update", t.Name())
	require.Equal(t, string(want), string(got), "differs from golden %s (rewrite with -update)", path)
}

// storeHolds reports the retained input files whose bytes contain s.
func storeHolds(t *testing.T, db, s string) []string {
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
