package run_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/idem-dev/idem/internal/job"
	"github.com/idem-dev/idem/internal/report"
	"github.com/idem-dev/idem/internal/run"
	"github.com/stretchr/testify/require"
)

// TestSkippedRunLoggedWithNextWrite: a run that writes nothing is logged
// with the handle's next commit, in its transaction, or when the handle
// closes, not in a transaction of its own; the run log keeps the order
// the runs decided in and each row the time its run decided.
func TestSkippedRunLoggedWithNextWrite(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ctx := context.Background()
	a, b := fixture(t, "fixtures/sample/occurrences-a.csv"), fixture(t, "fixtures/sample/occurrences-b.csv")
	j := sampleJob(t, dir, "sample", a)
	db, err := run.Open(ctx, j.Database, run.OpenOptions{DuckDB: job.DuckDBSettings{Threads: 1}})
	require.NoError(t, err)
	strs := func(db *run.DB, q string, args ...any) []string {
		t.Helper()
		rows, err := db.Query(ctx, q, args...)
		require.NoError(t, err)
		var out []string
		for _, r := range rows.Values {
			out = append(out, fmt.Sprint(r[0]))
		}
		return out
	}
	logged := func(db *run.DB) []string {
		t.Helper()
		return strs(db, `SELECT decision || ' ' || snapshot FROM idem.runs ORDER BY rowid`)
	}
	runOnce := func(input, want string) {
		t.Helper()
		res, err := db.RunTogether(ctx, []run.JobRun{{Job: j, Opts: run.RunOptions{Input: input}}})
		require.NoError(t, err)
		require.Equal(t, want, res[0].Decision)
	}

	runOnce(a, report.DecisionLoaded)
	runOnce(a, report.DecisionSkipped)
	require.Equal(t, []string{"loaded 1"}, logged(db), "the skipped run waits for the next write")
	skippedAt := time.Now().UTC()
	time.Sleep(20 * time.Millisecond)
	runOnce(b, report.DecisionLoaded)
	require.Equal(t, []string{"loaded 1", "skipped 1", "loaded 2"}, logged(db), "written in the commit's transaction, before it")
	runOnce(b, report.DecisionSkipped)
	runOnce(b, report.DecisionSkipped)
	require.Equal(t, []string{"loaded 1", "skipped 1", "loaded 2"}, logged(db))
	require.NoError(t, db.Close())

	db = openDB(t, j.Database)
	require.Equal(t, []string{"loaded 1", "skipped 1", "loaded 2", "skipped 2", "skipped 2"}, logged(db), "written at Close")
	// Each row keeps the time its run decided: the first skipped run's
	// is before the commit that wrote it.
	require.Equal(t, []string{"true"}, strs(db, `SELECT (SELECT run_at FROM idem.runs WHERE decision = 'skipped' ORDER BY rowid LIMIT 1) < ?::TIMESTAMP
		AND (SELECT max(run_at) FROM idem.runs WHERE decision = 'skipped') >= (SELECT max(run_at) FROM idem.runs WHERE decision = 'loaded')`, skippedAt))
}
