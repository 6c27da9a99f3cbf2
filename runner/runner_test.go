package runner_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idem-dev/idem/internal/report"
	"github.com/idem-dev/idem/runner"
)

func write(t *testing.T, path, text string) {
	t.Helper()
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
	require.NoError(t, os.WriteFile(path, []byte(text), 0o644))
}

// sourceJob is a merge_by_key job of input/src.csv in data/p.duckdb.
const sourceJob = `name = "src"
pipeline = "merge_by_key"
transform_version = 1
schema_version = 1
database = "data/p.duckdb"

[input]
path = "input/src.csv"

[input.columns]
id = "BIGINT"
day = "DATE"

[target]
key = ["id"]

[duckdb]
threads = 1
`

// model is a select job reading upstream, with sql as its v1.
func model(t *testing.T, dir, name, upstream, sql string) {
	t.Helper()
	write(t, filepath.Join(dir, name+".toml"), `name = "`+name+`"
pipeline = "select"
transform_version = 1
database = "data/p.duckdb"

[input]
upstream = ["`+upstream+`"]

[transform]
sql = "models/`+name+`"

[target]
key = ["day"]

[duckdb]
threads = 1
`)
	write(t, filepath.Join(dir, "models", name, "v1.sql"), sql)
}

// TestOptions: every option checks its value; Open returns the error as
// ErrUsage (exit 2) and opens nothing.
func TestOptions(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write(t, filepath.Join(dir, "src.toml"), sourceJob)
	for name, opt := range map[string]runner.Option{
		"memory limit":   runner.WithMemoryLimit("lots"),
		"threads 0":      runner.WithThreads(0),
		"threads 5000":   runner.WithThreads(5000),
		"negative wait":  runner.WithWait(-5 * time.Second),
		"no database":    runner.WithDatabase(""),
		"no temp folder": runner.WithTempDirectory(""),
		"concurrency 0":  runner.WithConcurrency(0),
		"empty select":   runner.WithSelect(""),
		"unknown select": runner.WithSelect("nope"),
	} {
		_, err := runner.Open(context.Background(), []string{dir}, opt)
		require.ErrorIs(t, err, runner.ErrUsage, name)
		require.Equal(t, runner.ExitUsage, runner.ExitCode(err), name)
	}
	require.NoDirExists(t, filepath.Join(dir, "data"))
	p, err := runner.Open(context.Background(), []string{dir}, runner.WithMemoryLimit("512MiB"), runner.WithWait(time.Second),
		runner.WithConcurrency(2), runner.WithSelect("src"))
	require.NoError(t, err)
	require.Equal(t, []string{"src"}, p.Jobs())
}

// TestOpenJobFile: a job file with an unknown key is ErrJobFile, exit 2,
// naming the file, the line and the key.
func TestOpenJobFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := filepath.Join(dir, "src.toml")
	write(t, file, sourceJob+"colour = \"red\"\n")
	_, err := runner.Open(context.Background(), []string{file})
	require.ErrorIs(t, err, runner.ErrJobFile)
	require.NotErrorIs(t, err, runner.ErrRefused)
	require.Equal(t, runner.ExitUsage, runner.ExitCode(err))
	require.Contains(t, err.Error(), file+":19: duckdb.colour: unknown key")
}

// TestRunPartial: a project whose model fails runs the rest: the source
// commits, the failed model is in the *PartialError (exit 1) and its
// downstream job is blocked, not run. RunJob of one job returns a
// *JobError naming it; a batch already committed with other content is
// refused (ErrRefused, exit 3).
func TestRunPartial(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	write(t, filepath.Join(dir, "input/src.csv"), "id,day\n1,2024-01-01\n2,2024-01-02\n")
	write(t, filepath.Join(dir, "src.toml"), sourceJob)
	model(t, dir, "broken", "src", "SELECT day, no_such_column FROM {{upstream:src}}\n")
	model(t, dir, "after", "broken", "SELECT day FROM {{upstream:broken}}\n")
	p, err := runner.Open(ctx, []string{dir})
	require.NoError(t, err)
	require.Equal(t, []string{"src", "broken", "after"}, p.Jobs())

	results, err := p.Run(ctx)
	var pe *runner.PartialError
	require.ErrorAs(t, err, &pe)
	require.Len(t, pe.Failed, 1)
	require.Equal(t, "broken", pe.Failed[0].Job)
	require.Equal(t, runner.ExitFailure, runner.ExitCode(err))
	require.Len(t, results, 3)
	require.Equal(t, runner.DecisionApplied, results[0].Decision)
	require.Equal(t, int64(1), results[0].Snapshot)
	require.Len(t, results[0].SHA256, 64)
	ex, err := p.Export(ctx, "src", runner.ExportOptions{Out: filepath.Join(dir, "src.csv")})
	require.NoError(t, err)
	require.Equal(t, ex.SHA256, results[0].SHA256, "the run's sha256 is its snapshot's canonical export's")
	require.Empty(t, results[2].SHA256, "a blocked job committed nothing")
	require.Equal(t, runner.DecisionFailed, results[1].Decision)
	require.Contains(t, results[1].Error, "no_such_column")
	require.Equal(t, runner.ExitFailure, results[1].ExitCode)
	require.Equal(t, runner.DecisionBlocked, results[2].Decision)
	require.Equal(t, []string{"broken"}, results[2].BlockedBy)

	plans, err := p.Plan(ctx)
	require.ErrorAs(t, err, &pe)
	require.Equal(t, runner.DecisionAlreadyCommitted, plans[0].Decision)
	require.Equal(t, runner.DecisionBlocked, plans[2].Decision)

	write(t, filepath.Join(dir, "input/other.csv"), "id,day\n3,2024-01-03\n")
	res, err := p.RunJob(ctx, "src", runner.Batch{Input: filepath.Join(dir, "input/other.csv"), ID: "src.csv"})
	require.Nil(t, res)
	var je *runner.JobError
	require.ErrorAs(t, err, &je)
	require.Equal(t, "src", je.Job)
	require.ErrorIs(t, err, runner.ErrRefused)
	require.Equal(t, runner.ExitRefused, runner.ExitCode(err))
	_, err = p.RunJob(ctx, "nope", runner.Batch{})
	require.ErrorIs(t, err, runner.ErrUsage)
	from, to := int64(0), int64(5)
	_, err = p.RunJob(ctx, "src", runner.Batch{To: &to})
	require.ErrorIs(t, err, runner.ErrUsage)
	_, err = p.PlanJob(ctx, "src", runner.Batch{From: &from})
	require.ErrorIs(t, err, runner.ErrUsage)
	res, err = p.RunJob(ctx, "src", runner.Batch{Input: filepath.Join(dir, "input/other.csv")})
	require.NoError(t, err)
	require.Equal(t, runner.DecisionApplied, res.Decision)
	require.Equal(t, int64(2), res.Snapshot)
}

// TestErrorsIs: a *PartialError unwraps to its jobs' errors.
func TestErrorsIs(t *testing.T) {
	t.Parallel()
	err := &runner.PartialError{Failed: []*runner.JobError{
		{Job: "a", Code: runner.ExitFailure, Err: errors.New("boom")},
		{Job: "b", Code: runner.ExitLocked, Err: runner.ErrLocked},
	}}
	require.ErrorIs(t, err, runner.ErrLocked)
	require.Equal(t, runner.ExitLocked, runner.ExitCode(err))
	require.Equal(t, "2 jobs failed; first a: boom", err.Error())
}

// TestConstants: the public exit codes and decisions are the ones the
// internal packages report.
func TestConstants(t *testing.T) {
	t.Parallel()
	require.Equal(t, []int{report.ExitOK, report.ExitFailure, report.ExitUsage, report.ExitRefused, report.ExitLocked},
		[]int{runner.ExitOK, runner.ExitFailure, runner.ExitUsage, runner.ExitRefused, runner.ExitLocked})
	require.Equal(t, []string{report.DecisionLoaded, report.DecisionApplied, report.DecisionSkipped, report.DecisionAlreadyCommitted, report.DecisionFailed, report.DecisionRefused},
		[]string{string(runner.DecisionLoaded), string(runner.DecisionApplied), string(runner.DecisionSkipped), string(runner.DecisionAlreadyCommitted), string(runner.DecisionFailed), string(runner.DecisionRefused)})
}

// TestAfterCommitError: a hook that fails does not undo the commit: the
// result comes back beside an *AfterCommitError, exit 0, and the snapshot
// is there; a nil hook is a usage error.
func TestAfterCommitError(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	write(t, filepath.Join(dir, "input/src.csv"), "id,day\n1,2024-01-01\n")
	write(t, filepath.Join(dir, "src.toml"), sourceJob)
	_, err := runner.Open(ctx, []string{dir}, runner.WithAfterCommit(nil))
	require.ErrorIs(t, err, runner.ErrUsage)
	boom := errors.New("catalog down")
	p, err := runner.Open(ctx, []string{dir}, runner.WithAfterCommit(func(context.Context, *runner.Project, runner.Commit) error { return boom }))
	require.NoError(t, err)
	res, err := p.RunJob(ctx, "src", runner.Batch{})
	require.ErrorIs(t, err, boom)
	var ae *runner.AfterCommitError
	require.ErrorAs(t, err, &ae)
	require.Equal(t, "src", ae.Job)
	require.Equal(t, runner.ExitOK, runner.ExitCode(err))
	require.Equal(t, runner.DecisionApplied, res.Decision)
	entries, err := p.Log(ctx, "src")
	require.NoError(t, err)
	require.Len(t, entries, 1)
	require.Equal(t, int64(1), entries[0].Snapshot)
}
