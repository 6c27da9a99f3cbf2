package run

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/idem-dev/idem/internal/job"
	"github.com/idem-dev/idem/internal/report"
	"github.com/stretchr/testify/require"
)

// TestAdaptiveThreads: a writable handle opened without a threads setting
// runs a run of small data on one thread and one of large data on DuckDB's
// default threads, with the same rows either way; a threads setting the
// user gave is kept whatever the data.
func TestAdaptiveThreads(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	threads := func(d *DB) string {
		var s string
		require.NoError(t, d.SQL().QueryRowContext(ctx, "SELECT current_setting('threads')").Scan(&s))
		return s
	}
	run := func(d *DB, dir, batch string) {
		j := writeJob(t, dir, mbkJob(false))
		in := filepath.Join(dir, batch+".jsonl")
		require.NoError(t, os.WriteFile(in, []byte(`{"k":1,"o":1,"v":"a","n":1}`+"\n"+`{"k":2,"o":1,"v":"`+batch+`","n":2}`+"\n"), 0o644))
		res, err := d.Run(ctx, j, RunOptions{Input: in})
		require.NoError(t, err)
		require.Equal(t, report.DecisionApplied, res.Decision)
	}
	rows := func(d *DB) string {
		var s string
		require.NoError(t, d.SQL().QueryRowContext(ctx, "SELECT string_agg(k || '=' || v, ',' ORDER BY k) FROM things").Scan(&s))
		return s
	}

	dir := t.TempDir()
	d, err := Open(ctx, filepath.Join(dir, "idem.duckdb"), OpenOptions{})
	require.NoError(t, err)
	t.Cleanup(func() { d.Close() })
	wide := threads(d)
	if wide == "1" {
		t.Skip("DuckDB's default is one thread on this machine")
	}
	run(d, dir, "b1")
	require.Equal(t, "1", threads(d), "a small run runs on one thread")
	d.threads.bytes = 1 // every input is large now
	run(d, dir, "b2")
	require.Equal(t, wide, threads(d), "a large run runs on the default threads")
	d.threads.bytes = smallBytes
	run(d, dir, "b3")
	require.Equal(t, "1", threads(d))
	require.Equal(t, "1=a,2=b3", rows(d))

	set := t.TempDir()
	s, err := Open(ctx, filepath.Join(set, "idem.duckdb"), OpenOptions{DuckDB: job.DuckDBSettings{Threads: 2}})
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	require.Nil(t, s.threads)
	run(s, set, "b1")
	require.Equal(t, "2", threads(s), "threads the user set are kept")
}
