package ops_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idem-dev/idem/internal/job"
	"github.com/idem-dev/idem/internal/ops"
	"github.com/idem-dev/idem/internal/run"
	idemsql "github.com/idem-dev/idem/sql"
)

// exampleJob is one of the example job files (configs/NAME.toml) on a
// database of the test's own, run through the library as the CLI runs it
// with --db and --threads 1.
type exampleJob struct {
	t  *testing.T
	j  *job.Job
	db string
}

func newExampleJob(t *testing.T, name string) *exampleJob {
	t.Helper()
	j, err := run.LoadJob(fixture(t, "configs/"+name+".toml"), idemsql.FS)
	require.NoError(t, err)
	j.DuckDB.Threads = 1
	return &exampleJob{t: t, j: j, db: filepath.Join(t.TempDir(), "idem.duckdb")}
}

func (e *exampleJob) open(readOnly bool, f func(d *run.DB)) {
	e.t.Helper()
	d, err := run.Open(context.Background(), e.db, run.OpenOptions{ReadOnly: readOnly, DuckDB: e.j.DuckDB})
	require.NoError(e.t, err)
	defer func() { require.NoError(e.t, d.Close()) }()
	f(d)
}

// run applies the fixture file rel (under fixtures/) with opts.
func (e *exampleJob) run(rel string, opts run.RunOptions) {
	e.t.Helper()
	opts.Input = fixture(e.t, "fixtures/"+rel)
	opts.Expire = ops.ExpireAfterRun
	e.open(false, func(d *run.DB) {
		_, err := d.Run(context.Background(), e.j, opts)
		require.NoError(e.t, err, "run %s", rel)
	})
}

func (e *exampleJob) erase(key string) {
	e.t.Helper()
	e.open(false, func(d *run.DB) {
		_, err := ops.Erase(context.Background(), d, e.j, ops.EraseOptions{Key: key})
		require.NoError(e.t, err)
	})
}

func (e *exampleJob) rollback(to int64) {
	e.t.Helper()
	e.open(false, func(d *run.DB) {
		_, err := ops.Rollback(context.Background(), d, e.j, to, ops.RollbackOptions{})
		require.NoError(e.t, err)
	})
}

// TestRerunReproducesSnapshots: a pinned re-run rebuilds a snapshot in a
// scratch database and reproduces its bytes (the pinned export's sha256),
// for each built-in pipeline, including the chain of an apply job and
// snapshots after an erasure and a rollback.
func TestRerunReproducesSnapshots(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		setup func(e *exampleJob)
		check []int64
	}{
		{"orders", func(e *exampleJob) {
			for _, f := range []string{"day-47.jsonl", "day-48.jsonl", "day-52-correction.jsonl", "day-52-delete.jsonl"} {
				e.run("orders/"+f, run.RunOptions{})
			}
			e.erase("ord-83")
			e.run("orders/day-52-correction.jsonl", run.RunOptions{BatchID: "replayed"})
			e.rollback(2)
		}, []int64{1, 3, 4, 5, 6, 7}},
		{"versioned_changes", func(e *exampleJob) {
			for _, b := range []string{"batch-1", "batch-2", "batch-3"} {
				e.run("changes/"+b+".jsonl", run.RunOptions{})
			}
		}, []int64{1, 2, 3}},
		{"sample", func(e *exampleJob) {
			e.run("sample/occurrences-a.csv", run.RunOptions{})
			e.run("sample/occurrences-b.csv", run.RunOptions{})
			e.rollback(1)
		}, []int64{1, 2, 3}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			e := newExampleJob(t, c.name)
			c.setup(e)
			e.open(true, func(d *run.DB) {
				for _, s := range c.check {
					res, err := ops.Rerun(context.Background(), d, e.j, ops.RerunOptions{Snapshot: s, DuckDB: e.j.DuckDB})
					require.NoError(t, err, "rerun of snapshot %d", s)
					require.True(t, res.Reproduced, "snapshot %d: %+v", s, res.Diff)
					require.Equal(t, s, res.Snapshot)
					exp, err := ops.Export(context.Background(), d, e.j, ops.ExportOptions{Snapshot: s, Format: job.FormatCSV,
						Out: filepath.Join(t.TempDir(), fmt.Sprintf("s%d.csv", s))})
					require.NoError(t, err)
					require.Equal(t, exp.SHA256, res.SHA256, "the pinned export of the snapshot")
					require.Equal(t, res.SHA256, res.Rebuilt)
				}
			})
		})
	}
}
