package run_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idem-dev/idem/internal/job"
	"github.com/idem-dev/idem/internal/report"
	"github.com/idem-dev/idem/internal/run"
)

// TestDescribedColumnsKeptAcrossProcesses: a model's described result
// columns (the schema part of its key) are kept, signed, so a later
// process's no-op does not describe it again; they are kept per upstream
// snapshot, so an upstream that commits new columns makes the model see
// them; and a kept row that was changed is not trusted.
func TestDescribedColumnsKeptAcrossProcesses(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ctx := context.Background()
	src := sampleJob(t, dir, "sample", fixture(t, "fixtures/sample/occurrences-a.csv"))
	u := writeModel(t, dir, "u", "devil", "id", "SELECT species_id, id FROM {{upstream:devil}}")
	m := writeModel(t, dir, "m", "u", "id", "SELECT * FROM {{upstream:u}}")
	path := src.Database
	open := func() *run.DB {
		db, err := run.Open(ctx, path, run.OpenOptions{DuckDB: job.DuckDBSettings{Threads: 1}})
		require.NoError(t, err)
		return db
	}
	runAll := func(db *run.DB, want map[string]string, jobs ...*job.Job) {
		t.Helper()
		for _, j := range jobs {
			res, err := db.Run(ctx, j, run.RunOptions{})
			require.NoError(t, err, j.Name)
			require.Equal(t, want[j.Name], res.Decision, j.Name)
		}
	}
	kept := func(db *run.DB) []string {
		t.Helper()
		got, err := db.Query(ctx, "SELECT value FROM idem.verdicts WHERE kind = 'describe' ORDER BY value")
		require.NoError(t, err)
		var out []string
		for _, r := range got.Values {
			out = append(out, r[0].(string))
		}
		return out
	}
	loaded := report.DecisionLoaded
	skipped := report.DecisionSkipped

	two := `["species_id BIGINT","id BIGINT"]`
	three := `["species_id BIGINT","id BIGINT","extra INTEGER"]`
	all := map[string]string{"devil": skipped, "u": skipped, "m": skipped}

	// The build keeps u's and m's columns with their commits, under keys
	// that name each model's state before it (none); a second commit keeps
	// them under the committed state a later run finds.
	db := open()
	runAll(db, map[string]string{"devil": loaded, "u": loaded, "m": loaded}, src, u, m)
	require.Equal(t, []string{two, two}, kept(db))
	for _, j := range []*job.Job{u, m} {
		res, err := db.Run(ctx, j, run.RunOptions{FullRefresh: true})
		require.NoError(t, err, j.Name)
		require.Equal(t, loaded, res.Decision, j.Name)
	}
	require.Equal(t, []string{two, two, two, two}, kept(db))
	require.NoError(t, db.Close())
	// A new process: nothing changed, every model skipped; a run that
	// commits nothing keeps nothing.
	db = open()
	runAll(db, all, src, u, m)
	require.Len(t, kept(db), 4)

	// u's result gains a column: its new snapshot is part of the key of
	// m's columns, so m is described again and sees the column.
	u = writeModel(t, dir, "u", "devil", "id", "SELECT species_id, id, 1 AS extra FROM {{upstream:devil}}")
	runAll(db, map[string]string{"u": loaded, "m": loaded}, u, m)
	cols, err := db.Query(ctx, "SELECT column_name FROM (DESCRIBE m)")
	require.NoError(t, err)
	require.Equal(t, [][]any{{"species_id"}, {"id"}, {"extra"}}, cols.Values)
	require.Equal(t, []string{three, three, two, two, two, two}, kept(db), "u's and m's new columns")
	runAll(db, all, src, u, m)
	require.NoError(t, db.Close())

	// A kept row changed outside idem is not trusted: its MAC no longer
	// matches, so the model is described again (and still skipped).
	db = open()
	_, err = db.SQL().ExecContext(ctx, `UPDATE idem.verdicts SET value = '["id BIGINT"]' WHERE kind = 'describe'`)
	require.NoError(t, err)
	require.NoError(t, db.Close())
	db = open()
	runAll(db, all, src, u, m)
	require.NoError(t, db.Close())
}
