package history_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idem-dev/idem/internal/export"
	"github.com/idem-dev/idem/internal/history"
	"github.com/idem-dev/idem/internal/job"
	"github.com/idem-dev/idem/internal/run"
	"github.com/idem-dev/idem/pipelines"
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
	j, err := run.LoadJob(fixture(t, "configs/"+name+".toml"), pipelines.FS)
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
func (e *exampleJob) run(rel string, opts run.RunOptions) *run.Result {
	e.t.Helper()
	return e.runFile(fixture(e.t, "fixtures/"+rel), opts)
}

// runFile applies the input file at path with opts.
func (e *exampleJob) runFile(path string, opts run.RunOptions) *run.Result {
	e.t.Helper()
	opts.Input = path
	opts.Expire = history.ExpireAfterRun
	var res *run.Result
	e.open(false, func(d *run.DB) {
		var err error
		res, err = d.Run(context.Background(), e.j, opts)
		require.NoError(e.t, err, "run %s", path)
	})
	return res
}

// export exports with opts from the database opened with threads DuckDB
// threads, as idem export --threads N does.
func (e *exampleJob) export(threads int, opts export.Options) *export.Result {
	e.t.Helper()
	d, err := run.Open(context.Background(), e.db, run.OpenOptions{ReadOnly: true, DuckDB: job.DuckDBSettings{Threads: threads}})
	require.NoError(e.t, err)
	defer func() { require.NoError(e.t, d.Close()) }()
	res, err := export.Export(context.Background(), d, e.j, opts)
	require.NoError(e.t, err, "export %+v", opts)
	return res
}

func (e *exampleJob) erase(key string) {
	e.t.Helper()
	e.open(false, func(d *run.DB) {
		_, err := history.Erase(context.Background(), d, e.j, history.EraseOptions{Key: key})
		require.NoError(e.t, err)
	})
}

func (e *exampleJob) rollback(to int64) {
	e.t.Helper()
	e.open(false, func(d *run.DB) {
		_, err := history.Rollback(context.Background(), d, e.j, to, history.RollbackOptions{})
		require.NoError(e.t, err)
	})
}

// TestRerunReproducesSnapshots: a pinned re-run rebuilds a snapshot in a
// scratch database and reproduces its bytes (the pinned export's sha256),
// for each built-in pipeline, including the chain of an apply job and
// snapshots after an erasure and a rollback. The orders chain reruns its
// first snapshot, the erasure, the batch after it and the rollback by
// default (each rerun replays the chain before it, day-52's correction and
// delete included); IDEM_LONG=1 also reruns snapshots 3 and 4 (the
// correction and the delete) on their own.
func TestRerunReproducesSnapshots(t *testing.T) {
	t.Parallel()
	orders := []int64{1, 5, 6, 7}
	if os.Getenv("IDEM_LONG") == "1" {
		orders = []int64{1, 3, 4, 5, 6, 7}
	}
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
		}, orders},
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
					res, err := history.Rerun(context.Background(), d, e.j, history.RerunOptions{Snapshot: s, DuckDB: e.j.DuckDB})
					require.NoError(t, err, "rerun of snapshot %d", s)
					require.True(t, res.Reproduced, "snapshot %d: %+v", s, res.Diff)
					require.Equal(t, s, res.Snapshot)
					exp, err := export.Export(context.Background(), d, e.j, export.Options{Snapshot: s, Format: job.FormatCSV,
						Out: filepath.Join(t.TempDir(), fmt.Sprintf("s%d.csv", s))})
					require.NoError(t, err)
					require.Equal(t, exp.SHA256, res.SHA256, "the pinned export of the snapshot")
					require.Equal(t, res.SHA256, res.Rebuilt)
				}
			})
		})
	}
}

// TestExportIsByteStable: two exports of one snapshot have one sha256, in
// every format, whatever the thread count (1, 2, 4 and 1 again), for the
// latest snapshot (read from the target) and an older one (read from
// history); so do two partitioned exports with 1 and 2 threads, whose
// manifest describes each file.
func TestExportIsByteStable(t *testing.T) {
	t.Parallel()
	e := newExampleJob(t, "orders")
	// Enough rows for DuckDB to split the work between threads.
	dir := t.TempDir()
	big := filepath.Join(dir, "big.jsonl")
	f, err := os.Create(big)
	require.NoError(t, err)
	w := bufio.NewWriter(f)
	const n = 150000
	for i := range n {
		fmt.Fprintf(w, `{"order_id":"o-%07d","position":%d,"kind":"upsert","amount_cents":%d,"event_day":%d,"schema_version":3,"currency":"%s"}`+"\n",
			(i*7919)%n, i+1, i%100000, 40+i%10, []string{"EUR", "USD", "INR"}[i%3])
	}
	require.NoError(t, w.Flush())
	require.NoError(t, f.Close())
	first := e.runFile(big, run.RunOptions{})
	require.Equal(t, int64(n), first.Outcomes["accepted"])
	e.run("orders/day-47.jsonl", run.RunOptions{})

	for _, format := range []string{"csv", "parquet", "jsonl"} {
		for _, snap := range []int64{1, 2} {
			t.Run(fmt.Sprintf("%s/snapshot-%d", format, snap), func(t *testing.T) {
				var sums []string
				for i, threads := range []int{1, 2, 4, 1} {
					out := filepath.Join(dir, fmt.Sprintf("s%d-%d.%s", snap, i, format))
					res := e.export(threads, export.Options{Snapshot: snap, Out: out})
					require.Equal(t, int64(n)+map[int64]int64{1: 0, 2: 3}[snap], res.Rows)
					st, err := os.Stat(out)
					require.NoError(t, err)
					require.Equal(t, st.Size(), res.Bytes)
					sums = append(sums, res.SHA256)
				}
				for _, s := range sums[1:] {
					require.Equal(t, sums[0], s, "threads 1, 2, 4 and 1 again give one sha256")
				}
			})
		}
	}

	t.Run("partitioned", func(t *testing.T) {
		var sums []string
		var last *export.Result
		for i, threads := range []int{1, 2} {
			out := filepath.Join(dir, fmt.Sprintf("parts-%d", i))
			last = e.export(threads, export.Options{Out: out, PartitionBy: "event_day", Format: job.FormatParquet})
			sums = append(sums, last.SHA256)
		}
		require.Equal(t, sums[0], sums[1])
		var m export.Manifest
		data, err := os.ReadFile(filepath.Join(last.Path, export.ManifestName))
		require.NoError(t, err)
		require.NoError(t, json.Unmarshal(data, &m))
		require.Len(t, m.Files, 10, "days 40..49")
		var rows int64
		for _, f := range m.Files {
			require.Equal(t, *f.Value, *f.Min)
			require.Equal(t, *f.Value, *f.Max)
			require.Equal(t, f.Rows, f.DistinctKeys, "one row per order")
			sum, err := os.ReadFile(filepath.Join(last.Path, f.Path))
			require.NoError(t, err)
			require.Equal(t, int64(len(sum)), f.Bytes)
			rows += f.Rows
		}
		require.Equal(t, int64(n)+3, rows)
		require.Equal(t, m.Rows, rows)
	})
}
