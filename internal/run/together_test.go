package run_test

import (
	"context"
	"database/sql"
	"errors"
	"testing"

	"github.com/idem-dev/idem/internal/report"
	"github.com/idem-dev/idem/internal/run"
	"github.com/stretchr/testify/require"
)

// TestRunTogether: a loader and a model reading it run in one transaction.
// The model pins the snapshot the loader is about to commit; both commit
// together. When the model's BeforeCommit fails, neither commits: the
// loader's new snapshot goes with the model's.
func TestRunTogether(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ctx := context.Background()
	src := sampleJob(t, dir, "sample", fixture(t, "fixtures/sample/occurrences-a.csv"))
	m := writeModel(t, dir, "m", "devil", "n", "SELECT count(*) AS n FROM {{upstream:devil}}")
	db := openDB(t, src.Database)

	results, err := db.RunTogether(ctx, []run.JobRun{{Job: src}, {Job: m}})
	require.NoError(t, err)
	require.Len(t, results, 2)
	require.Equal(t, report.DecisionLoaded, results[0].Decision)
	require.Equal(t, report.DecisionLoaded, results[1].Decision)
	require.Equal(t, "devil 1 (first pinned)", results[1].Upstream[0].String())
	before := dump(t, db)

	boom := errors.New("not the environment's rows")
	_, err = db.RunTogether(ctx, []run.JobRun{
		{Job: src, Opts: run.RunOptions{Input: fixture(t, "fixtures/sample/occurrences-b.csv")}},
		{Job: m, Opts: run.RunOptions{BeforeCommit: func(ctx context.Context, tx *sql.Tx, res *run.Result) error {
			require.Equal(t, "devil 1 → 2", res.Upstream[0].String(), "the model pins the loader's snapshot of this transaction")
			return boom
		}}},
	})
	require.ErrorIs(t, err, boom)
	require.Equal(t, before, dump(t, db), "a failed job of RunTogether left the other's commit")

	results, err = db.RunTogether(ctx, []run.JobRun{
		{Job: src, Opts: run.RunOptions{Input: fixture(t, "fixtures/sample/occurrences-b.csv")}},
		{Job: m},
	})
	require.NoError(t, err)
	require.EqualValues(t, 2, results[0].Snapshot)
	require.Equal(t, "devil 1 → 2", results[1].Upstream[0].String())
}
