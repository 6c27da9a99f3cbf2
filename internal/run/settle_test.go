package run_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/idem-dev/idem/internal/job"
	"github.com/idem-dev/idem/internal/run"
	"github.com/idem-dev/idem/internal/source"

	"github.com/stretchr/testify/require"

	"github.com/idem-dev/idem/pipelines"
)

// batchReader is a stream that gives its batches one per read, then
// nothing (after maxWait, as a quiet source does). Before each read it
// notes whether the database's WAL holds anything.
type batchReader struct {
	db      string
	batches [][]source.Record
	mu      sync.Mutex
	reads   int
	wal     []bool // per read: a WAL with bytes was beside the database
}

func (r *batchReader) Read(ctx context.Context, next map[string]int64, max int, maxWait time.Duration) ([]source.Record, []source.Gap, error) {
	r.mu.Lock()
	st, err := os.Stat(r.db + ".wal")
	r.wal = append(r.wal, err == nil && st.Size() > 0)
	i := r.reads
	r.reads++
	r.mu.Unlock()
	if i < len(r.batches) {
		return r.batches[i], nil, nil
	}
	select {
	case <-ctx.Done():
	case <-time.After(maxWait):
	}
	return nil, nil, nil
}

func (r *batchReader) Close() error { return nil }

// walBefore returns, per read, whether the WAL held commits.
func (r *batchReader) walBefore() []bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]bool(nil), r.wal...)
}

// streamDB opens a new database and loads a versioned_changes job of it
// reading a Kafka topic (never connected to: the tests give it a reader).
func streamDB(t *testing.T) (string, *job.Job, *run.DB) {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "idem.duckdb")
	jobPath := writeJob(t, dir, fmt.Sprintf(`name = "rides"
pipeline = "versioned_changes"
transform_version = 1
schema_version = 1
database = %q
[input]
kind = "kafka"
brokers = ["127.0.0.1:1"]
topic = "rides"
max_wait = "20ms"
[target]
table = "rides"
`, path))
	j, err := run.LoadJob(jobPath, pipelines.FS)
	require.NoError(t, err)
	return path, j, openDB(t, path)
}

// threeBatches is a stream of three batches of 40 records.
func threeBatches(path string) *batchReader {
	return &batchReader{db: path, batches: [][]source.Record{changes(0, 40), changes(40, 40), changes(80, 40)}}
}

// changes returns n records of partition 0 from position first on.
func changes(first, n int) []source.Record {
	out := make([]source.Record, n)
	for k := range n {
		i := first + k
		out[k] = source.Record{Partition: "0", Position: int64(i), Value: []byte(fmt.Sprintf(
			`{"change_id":"c%d","entity_id":"e%d","source_version":%d,"operation":"upsert","value":"v%d"}`, i, i%7, i+1, i))}
	}
	return out
}

// TestFollowSettlesWhenIdle: a follower leaves its batches' commits in
// the WAL while batches come, checkpoints them once a read finds nothing,
// before it goes on following, and its close leaves no WAL.
func TestFollowSettlesWhenIdle(t *testing.T) {
	t.Parallel()
	path, j, db := streamDB(t)
	r := threeBatches(path)
	out, err := db.RunStream(context.Background(), j, run.RunOptions{}, run.StreamOptions{Reader: r, Follow: true, IdleExit: 200 * time.Millisecond})
	require.NoError(t, err)
	require.Len(t, out, 3)
	wal := r.walBefore()
	require.Greater(t, len(wal), 5, "the follower read on after its batches")
	// Reads 2 and 3 come after commits left in the WAL; read 4 finds
	// nothing; the follower is idle and settles before read 5.
	require.Equal(t, []bool{false, true, true, true, false}, wal[:5], "WAL before each read")
	for i, w := range wal[5:] {
		require.False(t, w, "read %d: the WAL holds commits again", i+6)
	}
	require.Zero(t, db.Unsettled())
	require.NoError(t, db.Close())
	require.NoFileExists(t, path+".wal")
	db = openDB(t, path)
	rows, err := db.Query(context.Background(), `SELECT count(*), max(snapshot) FROM idem.snapshots WHERE job = 'rides'`)
	require.NoError(t, err)
	require.Equal(t, "[[3 3]]", fmt.Sprint(rows.Values))
}

// TestFollowSettlesAtWALSize: past DuckDB's checkpoint_threshold the
// COMMIT itself checkpoints, so a follower that is never idle does not
// grow its WAL without end (the threshold is made tiny here; idem sets
// it on open: walCheckpointThreshold).
func TestFollowSettlesAtWALSize(t *testing.T) {
	t.Parallel()
	path, j, db := streamDB(t)
	var threshold string
	require.NoError(t, db.SQL().QueryRowContext(context.Background(), `SELECT current_setting('checkpoint_threshold')`).Scan(&threshold))
	require.Equal(t, "16.0 MiB", threshold, "the threshold idem sets on open")
	_, err := db.SQL().ExecContext(context.Background(), `SET GLOBAL checkpoint_threshold = '1KB'`)
	require.NoError(t, err)
	r := threeBatches(path)
	out, err := db.RunStream(context.Background(), j, run.RunOptions{}, run.StreamOptions{Reader: r, Follow: true, MaxBatches: 3})
	require.NoError(t, err)
	require.Len(t, out, 3)
	require.Equal(t, []bool{false, false, false}, r.walBefore(), "WAL before each read")
}

// TestCommitsSettleAtClose: commits on one handle (the jobs of a project
// run) stay in the WAL until the handle closes, which checkpoints them;
// each is committed all the same, as an open after a kill finds.
func TestCommitsSettleAtClose(t *testing.T) {
	t.Parallel()
	path, j, db := streamDB(t)
	for i := range 3 {
		_, err := db.RunStream(context.Background(), j, run.RunOptions{}, run.StreamOptions{Reader: &batchReader{db: path, batches: [][]source.Record{changes(40*i, 40)}}})
		require.NoError(t, err)
		require.Equal(t, i+1, db.Unsettled())
		require.FileExists(t, path+".wal")
	}
	// What a kill would leave: the file and its WAL, copied while the
	// handle holds them.
	crashed := filepath.Join(t.TempDir(), "idem.duckdb")
	for _, p := range []string{"", ".wal"} {
		b, err := os.ReadFile(path + p)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(crashed+p, b, 0o644))
	}
	require.NoError(t, db.Close())
	require.NoFileExists(t, path+".wal")
	for _, p := range []string{path, crashed} {
		db := openDB(t, p)
		rows, err := db.Query(context.Background(), `SELECT count(*), max(snapshot) FROM idem.snapshots WHERE job = 'rides'`)
		require.NoError(t, err)
		require.Equal(t, "[[3 3]]", fmt.Sprint(rows.Values), p)
	}
}

// TestIndexBuiltIsCheckpointedAtOnce: a commit that builds an index over
// rows (here in a step, after the rows) is checkpointed at once, not left
// in the WAL: DuckDB 1.5.6 fails to replay such a WAL on a read-only open
// ("Could not write file"), and the open that checks a WAL before a
// writable one is read-only, so a kill before a later checkpoint would
// lock every command out. A commit without a new index stays in the WAL.
func TestIndexBuiltIsCheckpointedAtOnce(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	a, batch := fixture(t, "fixtures/sample/occurrences-a.csv"), fixture(t, "fixtures/changes/batch-1.jsonl")
	t.Chdir(dir)
	copyPipeline(t, "sample", filepath.Join(dir, "indexed"))
	step := filepath.Join(dir, "indexed", "transform", "v1", "04_commit.sql")
	data, err := os.ReadFile(step)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(step, append(data, []byte("\nCREATE INDEX devil_species ON {{table}} (species_id);\n")...), 0o644))
	j := sampleJob(t, dir, "indexed", a)
	db := openDB(t, j.Database)
	res, err := db.Run(ctx, j, run.RunOptions{})
	require.NoError(t, err, "a step that builds an index")
	require.EqualValues(t, 1, res.Snapshot)
	require.Zero(t, db.Unsettled())
	require.NoFileExists(t, j.Database+".wal")

	// A pipeline that builds no index: its commit stays in the WAL.
	plain := *sampleJob(t, dir, "versioned_changes", batch)
	plain.Name, plain.Table = "plain", "plain_target"
	_, err = db.Run(ctx, &plain, run.RunOptions{})
	require.NoError(t, err)
	require.Equal(t, 1, db.Unsettled())
	require.FileExists(t, j.Database+".wal")
}
