package run_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/idem-dev/idem/internal/job"
	"github.com/idem-dev/idem/internal/jobkey"
	"github.com/idem-dev/idem/internal/report"
	"github.com/idem-dev/idem/internal/run"

	"github.com/stretchr/testify/require"

	"github.com/idem-dev/idem/pipelines"
)

func fixture(t *testing.T, rel string) string {
	t.Helper()
	p, err := filepath.Abs(filepath.Join("../..", rel))
	require.NoError(t, err)
	return p
}

func writeJob(t *testing.T, dir, body string) string {
	t.Helper()
	p := filepath.Join(dir, "job.toml")
	require.NoError(t, os.WriteFile(p, []byte(body), 0o644))
	return p
}

func sampleJob(t *testing.T, dir, pipeline, input string) *job.Job {
	t.Helper()
	path := writeJob(t, dir, fmt.Sprintf(`name = "devil"
pipeline = %q
transform_version = 1
schema_version = 1
database = %q

[input]
path = %q

[target]
table = "devil_target"
`, pipeline, filepath.Join(dir, "idem.duckdb"), input))
	j, err := run.LoadJob(path, pipelines.FS)
	require.NoError(t, err)
	return j
}

// dump captures everything a run may write, for before/after comparisons.
func dump(t *testing.T, db *run.DB) string {
	t.Helper()
	var b strings.Builder
	for _, q := range []string{
		`SELECT * FROM devil_target ORDER BY id`,
		`SELECT * FROM devil_target_outcomes ORDER BY ALL`,
		`SELECT job, job_key, parts, snapshot, cursor, epoch FROM idem.jobs ORDER BY job`,
		`SELECT job, snapshot, parent, job_key FROM idem.snapshots ORDER BY ALL`,
		`SELECT * FROM idem."devil__history" ORDER BY ALL`,
		`SELECT job, batch_id, digest, snapshot FROM idem.ledger ORDER BY ALL`,
	} {
		rows, err := db.Query(context.Background(), q)
		require.NoError(t, err, q)
		fmt.Fprintf(&b, "%s\n%v\n", q, rows.Values)
	}
	return b.String()
}

func openDB(t *testing.T, path string) *run.DB {
	t.Helper()
	db, err := run.Open(context.Background(), path, run.OpenOptions{DuckDB: job.DuckDBSettings{Threads: 1}})
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	return db
}

func TestFailureBeforeCommitChangesNothing(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ctx := context.Background()
	j := sampleJob(t, dir, "sample", fixture(t, "fixtures/sample/occurrences-a.csv"))
	db := openDB(t, j.Database)
	res, err := db.Run(ctx, j, run.RunOptions{})
	require.NoError(t, err)
	require.Equal(t, report.DecisionLoaded, res.Decision)
	before := dump(t, db)

	for _, opts := range []run.RunOptions{
		{Input: fixture(t, "fixtures/sample/occurrences-b.csv"), FailAfterTarget: true},
		{Input: fixture(t, "fixtures/sample/occurrences-b.csv"), Fault: func(p string) {
			if p == run.FaultBeforeCommit {
				panic("fault hook must not be reached: FailAfterTarget comes first")
			}
		}, FailAfterTarget: true},
	} {
		_, err = db.Run(ctx, j, opts)
		require.ErrorContains(t, err, "injected failure")
		require.Equal(t, before, dump(t, db), "a failed run must leave target, state, key and history as they were")
	}

	// The same run without the failure commits and reports the input change.
	res, err = db.Run(ctx, j, run.RunOptions{Input: fixture(t, "fixtures/sample/occurrences-b.csv")})
	require.NoError(t, err)
	require.Equal(t, report.DecisionLoaded, res.Decision)
	require.Equal(t, []string{jobkey.PartInput}, res.Changed)
	require.EqualValues(t, 2, res.Snapshot)
}

// copyPipeline copies a built-in pipeline to a folder on disk.
func copyPipeline(t *testing.T, name, dst string) {
	t.Helper()
	sub, err := fs.Sub(pipelines.FS, name)
	require.NoError(t, err)
	require.NoError(t, fs.WalkDir(sub, ".", func(p string, d fs.DirEntry, err error) error {
		require.NoError(t, err)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, p), 0o755)
		}
		data, err := fs.ReadFile(sub, p)
		require.NoError(t, err)
		return os.WriteFile(filepath.Join(dst, p), data, 0o644)
	}))
}

func TestEditedReleasedSQLIsRefused(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	input := fixture(t, "fixtures/sample/occurrences-a.csv")
	t.Chdir(dir)
	copyPipeline(t, "sample", filepath.Join(dir, "mysample"))
	j := sampleJob(t, dir, "mysample", input)
	db := openDB(t, j.Database)
	_, err := db.Run(ctx, j, run.RunOptions{})
	require.NoError(t, err)
	before := dump(t, db)

	step := filepath.Join(dir, "mysample", "transform", "v1", "03_outcomes.sql")
	data, err := os.ReadFile(step)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(step, []byte(strings.Replace(string(data), "'over_cap'", "'capped'", 1)), 0o644))
	j = sampleJob(t, dir, "mysample", input)
	_, err = db.Run(ctx, j, run.RunOptions{})
	require.ErrorIs(t, err, report.ErrRefused)
	require.Equal(t, report.ExitRefused, report.ExitCode(err))
	require.ErrorContains(t, err, "transform v1 of pipeline sample was edited after release")
	require.ErrorContains(t, err, "add a new version")
	require.Equal(t, before, dump(t, db))
}

func TestJobFileErrors(t *testing.T) {
	t.Parallel()
	good := `name = "j"
pipeline = "sample"
transform_version = 1
schema_version = 1
database = "x.duckdb"

[input]
path = "a.csv"

[params]
cap = 10
`
	cases := []struct {
		name, body, want string
		line             int
	}{
		{"unknown top key", strings.Replace(good, `database = "x.duckdb"`, "database = \"x.duckdb\"\ncolour = 1", 1), "colour: unknown key", 6},
		{"unknown input key", strings.Replace(good, `path = "a.csv"`, "path = \"a.csv\"\nformatt = \"csv\"", 1), "input.formatt: unknown key", 9},
		{"param wrong type", strings.Replace(good, "cap = 10", `cap = "ten"`, 1), `params.cap: want integer, found a string "ten"`, 11},
		{"param undeclared", strings.Replace(good, "cap = 10", "cap = 10\nsize = 3", 1), "params.size: pipeline sample does not declare this parameter (declared: cap, licenses)", 12},
		{"list param element", strings.Replace(good, "cap = 10", "licenses = [\"a\", 2]", 1), "params.licenses: want a list of strings, found an element an integer 2", 11},
		{"missing transform version", strings.Replace(good, "transform_version = 1", "transform_version = 9", 1), "transform_version: pipeline sample has no transform version 9 (present: v1, v2)", 3},
		{"missing schema version", strings.Replace(good, "schema_version = 1", "schema_version = 3", 1), "schema_version: pipeline sample has no schema version 3 (present: v1, v2)", 4},
		{"missing pipeline", strings.Replace(good, `pipeline = "sample"`, `pipeline = "nope"`, 1), `pipeline: no built-in pipeline named "nope"`, 2},
		{"syntax error", strings.Replace(good, "cap = 10", "cap = = 10", 1), "job.toml:11", 11},
		{"hostile table", good + "\n[target]\ntable = 'x\"; DROP TABLE y; --'\n", "target.table: must be a table name", 14},
		{"wrong top-level type", strings.Replace(good, "transform_version = 1", `transform_version = "1"`, 1), "transform_version", 3},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			path := writeJob(t, dir, c.body)
			_, err := run.LoadJob(path, pipelines.FS)
			require.Error(t, err)
			var jfe *report.JobFileError
			require.True(t, errors.As(err, &jfe), "%T %v", err, err)
			require.Equal(t, report.ExitUsage, report.ExitCode(err))
			require.Contains(t, err.Error(), c.want)
			require.Contains(t, err.Error(), path)
			require.Equal(t, c.line, jfe.Line, err.Error())
		})
	}
}

func TestDatabaseNamedIdemWorks(t *testing.T) {
	t.Parallel()
	// A file's catalog name is its base name; idem's own schema is also
	// called idem. The file is attached under a fixed alias so both work.
	dir := t.TempDir()
	j := sampleJob(t, dir, "sample", fixture(t, "fixtures/sample/occurrences-a.csv"))
	db := openDB(t, filepath.Join(dir, "idem.duckdb"))
	res, err := db.Run(context.Background(), j, run.RunOptions{})
	require.NoError(t, err)
	require.Equal(t, report.DecisionLoaded, res.Decision)
	var n int
	require.NoError(t, db.SQL().QueryRow(`SELECT count(*) FROM idem.jobs`).Scan(&n))
	require.Equal(t, 1, n)
}
