package streamtest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/idem-dev/idem/cmd/idem/cli/internal/clitest"
	"github.com/idem-dev/idem/internal/report"
	"github.com/idem-dev/idem/internal/run"
	"github.com/idem-dev/idem/internal/source"
	"github.com/idem-dev/idem/pipelines"
)

// TestStreamKafka: a run applies the records past the committed positions
// as one batch named after its ranges, commits the positions with it, skips
// when nothing is new, follows new records, and rerun rebuilds a stream
// snapshot from its retained batch.
func TestStreamKafka(t *testing.T) {
	t.Parallel()
	k := clitest.StartKafka(t, 3)
	dir := t.TempDir()
	jobPath := k.JobFile(dir, "")
	db := filepath.Join(dir, "rides.duckdb")
	for i := range 30 {
		k.Produce(clitest.RideChange(i, 9, 3))
	}
	code, stdout, stderr := clitest.InProcess(t, "run", jobPath, "--json")
	require.Equal(t, 0, code, stderr)
	b := clitest.BatchLines(t, stdout)
	require.Len(t, b, 1)
	require.Equal(t, "applied", b[0].Decision)
	require.Equal(t, "rides:0:0-9,1:0-9,2:0-9", b[0].BatchID)
	require.Equal(t, 30, b[0].Records)
	require.Equal(t, map[string]int64{"0": 10, "1": 10, "2": 10}, b[0].Positions)
	require.Equal(t, []string{"0 10 1", "1 10 1", "2 10 1"}, clitest.QueryStrs(t, db, `SELECT concat_ws(' ', partition, next, snapshot) FROM idem.positions WHERE job = 'rides' ORDER BY partition`))
	require.Equal(t, []int64{9}, clitest.QueryInts(t, db, `SELECT count(*) FROM rides`))

	// Nothing new: skipped, nothing written.
	before := clitest.CaptureState(t, db)
	code, stdout, stderr = clitest.InProcess(t, "run", jobPath)
	require.Equal(t, 0, code, stderr)
	require.Contains(t, stdout, "rides: skipped: nothing new past the committed positions")
	require.Equal(t, before, clitest.CaptureState(t, db))

	// --follow picks up new records until idle; the text shows rate and lag.
	for i := 30; i < 36; i++ {
		k.Produce(clitest.RideChange(i, 9, 3))
	}
	code, stdout, stderr = clitest.InProcess(t, "run", jobPath, "--follow", "--idle-exit", "700ms")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, stdout, "rides: applied rides:0:10-11,1:10-11,2:10-11 · snapshot 2 · 6 records")
	require.Contains(t, stdout, "records/s · lag 0:0 1:0 2:0")
	require.Equal(t, []int64{12, 12, 12}, clitest.QueryInts(t, db, `SELECT next FROM idem.positions ORDER BY partition`))

	// The batch was retained: rerun rebuilds snapshot 1 and proves it.
	code, stdout, stderr = clitest.InProcess(t, "rerun", jobPath, "--snapshot", "1")
	require.Equal(t, 0, code, stdout+stderr)

	// A flag of files jobs is refused for a stream job.
	code, _, stderr = clitest.InProcess(t, "run", jobPath, "--batch-id", "x")
	require.Equal(t, 2, code)
	require.Contains(t, stderr, "--input, --batch-id, --from/--to and --partitions do not apply")
}

// TestStreamGap: records deleted before idem read them are refused with
// exit 3, naming the partition and positions, with nothing written;
// --allow-gap applies what is left and logs the gap.
func TestStreamGap(t *testing.T) {
	t.Parallel()
	k := clitest.StartKafka(t, 1)
	dir := t.TempDir()
	jobPath := k.JobFile(dir, "")
	db := filepath.Join(dir, "rides.duckdb")
	for i := range 10 {
		k.Produce(clitest.RideChange(i, 4, 1))
	}
	code, _, stderr := clitest.InProcess(t, "run", jobPath)
	require.Equal(t, 0, code, stderr)
	for i := 10; i < 20; i++ {
		k.Produce(clitest.RideChange(i, 4, 1))
	}
	k.DeleteBefore(0, 15)
	before := clitest.CaptureState(t, db)
	code, _, stderr = clitest.InProcess(t, "run", jobPath, "--follow", "--idle-exit", "500ms")
	require.Equal(t, 3, code, stderr)
	require.Contains(t, stderr, "stream gap for job rides: partition 0: committed next position 10, first position the source holds 15 (5 records lost)")
	require.Contains(t, stderr, "--allow-gap")
	require.Equal(t, before, clitest.CaptureState(t, db))

	code, stdout, stderr := clitest.InProcess(t, "run", jobPath, "--allow-gap", "--json")
	require.Equal(t, 0, code, stderr)
	b := clitest.BatchLines(t, stdout)
	require.Len(t, b, 1)
	require.Equal(t, "rides:0:15-19", b[0].BatchID)
	require.Equal(t, 5, b[0].Records)
	require.Contains(t, b[0].Gap, "partition 0 positions 10-14 (5 records)")
	require.Equal(t, []int64{20}, clitest.QueryInts(t, db, `SELECT next FROM idem.positions`))
	require.Equal(t, []string{"gap accepted (--allow-gap): the source no longer held partition 0 positions 10-14 (5 records)"},
		clitest.QueryStrs(t, db, `SELECT message FROM idem.runs WHERE batch_id = 'rides:0:15-19'`))
}

// replayReader is a broker replaying: at its replayAt-th read, or the
// first after it once a batch committed (a read of max_wait may return
// nothing on a loaded machine, and then nothing is committed to replay),
// it first re-delivers every partition from offset 0 (a consumer reset),
// then what was asked for.
type replayReader struct {
	inner    source.StreamReader
	n        int
	replayAt int
	done     bool
}

func (r *replayReader) Read(ctx context.Context, next map[string]int64, max int, wait time.Duration) ([]source.Record, []source.Gap, error) {
	r.n++
	committed := false
	for _, pos := range next {
		committed = committed || pos > 0
	}
	if r.done || r.n < r.replayAt || !committed {
		return r.inner.Read(ctx, next, max, wait)
	}
	r.done = true
	zero := map[string]int64{}
	for p := range next {
		zero[p] = 0
	}
	// The re-delivery itself must happen: on a loaded machine one read of
	// max_wait may return nothing, so read again until it does (or 20 s).
	var old []source.Record
	for deadline := time.Now().Add(20 * time.Second); len(old) == 0 && time.Now().Before(deadline); {
		var err error
		if old, _, err = r.inner.Read(ctx, zero, max, wait); err != nil {
			return nil, nil, err
		}
	}
	recs, gaps, err := r.inner.Read(ctx, next, max, wait)
	return append(old, recs...), gaps, err
}

func (r *replayReader) Close() error { return r.inner.Close() }

// TestStreamBrokerReplay: a broker that re-delivers from offset 0 mid-way
// doubles nothing: every record has exactly one outcome, the target equals
// one pass over the records, the positions equal the log ends.
func TestStreamBrokerReplay(t *testing.T) {
	t.Parallel()
	k := clitest.StartKafka(t, 3)
	dir := t.TempDir()
	jobPath := k.JobFile(dir, "max_records = 40\n")
	dbPath := filepath.Join(dir, "rides.duckdb")
	const n = 300
	for i := range n {
		k.Produce(clitest.RideChange(i, 20, 3))
	}
	j, err := run.LoadJob(jobPath, pipelines.FS)
	require.NoError(t, err)
	kr, err := source.NewKafkaReader(j.Input.Stream)
	require.NoError(t, err)
	ctx := context.Background()
	db, err := run.Open(ctx, dbPath, run.OpenOptions{})
	require.NoError(t, err)
	replayed := 0
	res, err := db.RunStream(ctx, j, run.RunOptions{}, run.StreamOptions{Reader: &replayReader{inner: kr, replayAt: 4}, Follow: true, IdleExit: 500 * time.Millisecond,
		OnBatch: func(sr *run.StreamResult) { replayed += sr.Replayed }})
	require.NoError(t, err)
	require.NoError(t, db.Close())
	require.Greater(t, replayed, 0, "the replay re-delivered committed records")
	require.Greater(t, len(res), 3)
	require.Equal(t, []int64{n, n}, clitest.QueryInts(t, dbPath, `SELECT count(*) FROM rides_outcomes UNION ALL SELECT count(DISTINCT change_id) FROM rides_outcomes`))
	require.Equal(t, clitest.LogEnds(n, 20, 3), clitest.QueryInts(t, dbPath, `SELECT next FROM idem.positions ORDER BY partition`))
	require.Equal(t, clitest.FoldRides(n, 20), clitest.QueryStrs(t, dbPath, `SELECT concat_ws(' ', entity_id, source_version, value) FROM rides ORDER BY entity_id`))
}

// TestRidesConfig runs configs/rides.toml as the README's "Streaming from
// Kafka" does, its broker an in-process kfake cluster: the first run
// applies, the second commits nothing, rerun reproduces the snapshot, lint
// is clean.
func TestRidesConfig(t *testing.T) {
	t.Parallel()
	k := clitest.StartKafka(t, 3)
	root := clitest.RepoRoot(t)
	text, err := os.ReadFile(filepath.Join(root, "configs", "rides.toml"))
	require.NoError(t, err)
	require.Contains(t, string(text), `brokers = ["127.0.0.1:9092"]`)
	dir := t.TempDir()
	jobPath := filepath.Join(dir, "configs", "rides.toml")
	clitest.WriteFile(t, jobPath, strings.Replace(string(text), "127.0.0.1:9092", k.Addr, 1))
	for i := range 50 {
		k.Produce(clitest.RideChange(i, 10, 3))
	}
	db := filepath.Join(dir, "data", "rides.duckdb")
	code, stdout, stderr := clitest.InProcess(t, "run", jobPath, "--json")
	require.Equal(t, 0, code, stderr)
	require.Equal(t, "applied", clitest.BatchLines(t, stdout)[0].Decision)
	code, stdout, stderr = clitest.InProcess(t, "run", jobPath, "--json")
	require.Equal(t, 0, code, stderr)
	require.Equal(t, "skipped", clitest.BatchLines(t, stdout)[0].Decision)
	code, stdout, stderr = clitest.InProcess(t, "rerun", jobPath, "--json")
	require.Equal(t, 0, code, stdout+stderr)
	require.Contains(t, stdout, `"reproduced":true`)
	code, stdout, stderr = clitest.InProcess(t, "lint", jobPath)
	require.Equal(t, 0, code, stdout+stderr)
	require.Equal(t, []int64{10}, clitest.QueryInts(t, db, `SELECT count(*) FROM rides`))
}

// TestStreamThroughput (IDEM_STREAM_BENCH=1; not part of CI) measures
// records/s of run --follow from kfake into versioned_changes against the
// same records applied from one JSONL file. IDEM_STREAM_BENCH_N sets the
// number of records (default 100,000).
func TestStreamThroughput(t *testing.T) {
	if os.Getenv("IDEM_STREAM_BENCH") != "1" {
		t.Skip("set IDEM_STREAM_BENCH=1 to measure stream throughput")
	}
	n := 100000
	if s := os.Getenv("IDEM_STREAM_BENCH_N"); s != "" {
		_, err := fmt.Sscan(s, &n)
		require.NoError(t, err)
	}
	k := clitest.StartKafka(t, 3)
	var file strings.Builder
	recs := make([]*kgo.Record, 0, 1000)
	for i := range n {
		r := clitest.RideChange(i, n/4+1, 3)
		file.Write(r.Value)
		file.WriteByte('\n')
		recs = append(recs, r)
		if len(recs) == cap(recs) || i == n-1 {
			k.Produce(recs...)
			recs = recs[:0]
		}
	}
	dir := t.TempDir()
	// The follower stops after its last batch (--max-batches), so that its
	// time holds everything it pays, the checkpoint it leaves for its close
	// included, and no idle wait.
	batches := (n + 9999) / 10000
	start := time.Now()
	code, stdout, stderr := clitest.InProcess(t, "run", k.JobFile(dir, ""), "--follow", "--max-batches", fmt.Sprint(batches), "--idle-exit", "5s", "--json")
	follow := time.Since(start)
	if os.Getenv("IDEM_TIMINGS") != "" {
		t.Log(stderr)
	}
	require.Equal(t, 0, code, stderr)
	got := 0
	for _, b := range clitest.BatchLines(t, stdout) {
		got += b.Records
	}
	require.Equal(t, n, got)

	in := filepath.Join(dir, "all.jsonl")
	clitest.WriteFile(t, in, file.String())
	jobFile := filepath.Join(dir, "file.toml")
	clitest.WriteFile(t, jobFile, fmt.Sprintf("name = \"rides\"\npipeline = \"versioned_changes\"\ntransform_version = 1\nschema_version = 1\n[input]\npath = %q\n[target]\ntable = \"rides\"\n", in))
	start = time.Now()
	code, _, stderr = clitest.InProcess(t, "run", jobFile, "--db", filepath.Join(dir, "file.duckdb"), "--json")
	once := time.Since(start)
	require.Equal(t, 0, code, stderr)
	// The same records as JSONL files of 10,000 (the stream's batches).
	lines := strings.SplitAfter(file.String(), "\n")
	start = time.Now()
	files := 0
	for i := 0; i < n; i += 10000 {
		p := filepath.Join(dir, fmt.Sprintf("part-%03d.jsonl", i/10000))
		clitest.WriteFile(t, p, strings.Join(lines[i:min(i+10000, n)], ""))
		code, _, stderr = clitest.InProcess(t, "run", jobFile, "--db", filepath.Join(dir, "files.duckdb"), "--input", p)
		require.Equal(t, 0, code, stderr)
		files++
	}
	batched := time.Since(start)
	t.Logf("%d records: --follow from kfake %.0f records/s (%s, %d batches); one JSONL file %.0f records/s (%s); %d JSONL files of 10,000 %.0f records/s (%s)",
		n, float64(n)/follow.Seconds(), follow.Round(time.Millisecond), len(clitest.BatchLines(t, stdout)), float64(n)/once.Seconds(), once.Round(time.Millisecond),
		files, float64(n)/batched.Seconds(), batched.Round(time.Millisecond))
}

// TestStreamFollowSIGTERM: SIGTERM while a batch of run --follow waits to
// commit (held by IDEM_FAULT=block:before_commit) rolls that batch back whole, and idem exits 0 with every idem
// table as the committed batches left it.
func TestStreamFollowSIGTERM(t *testing.T) {
	t.Parallel()
	k := clitest.StartKafka(t, 1)
	dir := t.TempDir()
	jobPath := k.JobFile(dir, "")
	db := filepath.Join(dir, "rides.duckdb")
	for i := range 20 {
		k.Produce(clitest.RideChange(i, 5, 1))
	}
	code, _, stderr := clitest.InProcess(t, "run", jobPath)
	require.Equal(t, 0, code, stderr)
	for i := 20; i < 30; i++ {
		k.Produce(clitest.RideChange(i, 5, 1))
	}
	before := clitest.CaptureState(t, db)

	// The follower is held before the COMMIT of its first batch; SIGTERM
	// cancels it there, which also lets the fault point go: the canceled
	// batch rolls back instead of committing.
	follower := clitest.StartBlocked(t, "", "before_commit", "run", jobPath, "--follow", "--json")
	require.NoError(t, follower.Cmd.Process.Signal(syscall.SIGTERM))
	select {
	case <-follower.Done:
	case <-time.After(2 * time.Minute):
		t.Fatalf("the follower did not stop after SIGTERM: %s", follower.ErrText())
	}
	code, stdout, stderr := follower.Wait(t)
	require.Equal(t, 0, code, "idem run --follow exits 0 after SIGTERM: %s", stderr)
	require.Contains(t, stderr, "released (canceled)")
	require.Empty(t, strings.TrimSpace(stdout), "no batch committed")
	require.Equal(t, before, clitest.CaptureState(t, db))
	require.Equal(t, []int64{20}, clitest.QueryInts(t, db, `SELECT next FROM idem.positions`))
}

// TestStreamPositionMovedIsRefused: a batch read from positions that are no
// longer the committed ones (another batch committed since) is refused
// inside the transaction, exit 3, with nothing written: it never applies
// records twice.
func TestStreamPositionMovedIsRefused(t *testing.T) {
	t.Parallel()
	k := clitest.StartKafka(t, 1)
	dir := t.TempDir()
	jobPath := k.JobFile(dir, "")
	dbPath := filepath.Join(dir, "rides.duckdb")
	for i := range 20 {
		k.Produce(clitest.RideChange(i, 5, 1))
	}
	j, err := run.LoadJob(jobPath, pipelines.FS)
	require.NoError(t, err)
	ctx := context.Background()
	db, err := run.Open(ctx, dbPath, run.OpenOptions{})
	require.NoError(t, err)
	defer db.Close()
	small := *j
	small.Input.Stream.MaxRecords = 5
	kr, err := source.NewKafkaReader(j.Input.Stream)
	require.NoError(t, err)
	defer kr.Close()
	stale, err := source.ReadStreamBatch(ctx, db.SQL(), &small, kr, t.TempDir(), false)
	require.NoError(t, err)
	require.Equal(t, "rides:0:0-4", stale.ID)
	_, err = db.RunStream(ctx, j, run.RunOptions{}, run.StreamOptions{})
	require.NoError(t, err)
	require.NoError(t, db.Close())
	before := clitest.CaptureState(t, dbPath)

	db, err = run.Open(ctx, dbPath, run.OpenOptions{})
	require.NoError(t, err)
	_, err = db.Run(ctx, j, run.RunOptions{Source: &source.Stream{Job: j, Batch: stale}, BatchID: stale.ID})
	require.Error(t, err)
	require.Equal(t, 3, report.ExitCode(err))
	require.Contains(t, err.Error(), "stream position of partition 0 moved from 0 to 20 since batch rides:0:0-4 was read")
	require.NoError(t, db.Close())
	require.Equal(t, before, clitest.CaptureState(t, dbPath))
}

// TestStreamBadRecord: records that are not one record the pipeline can
// read, among valid ones, are each an invalid_* outcome naming partition
// and offset, not a wall: not one JSON object, empty, a tombstone, invalid
// UTF-8, a field twice, a field the pipeline does not read, past
// max_record_bytes. The batch commits, the positions move past them, every
// record has exactly one outcome, the target is the fold of the valid
// ones, the snapshot records the rejects (a bounded prefix each) and rerun
// reproduces it.
func TestStreamBadRecord(t *testing.T) {
	t.Parallel()
	k := clitest.StartKafka(t, 1)
	dir := t.TempDir()
	jobPath := k.JobFile(dir, "max_record_bytes = 300\n")
	db := filepath.Join(dir, "rides.duckdb")
	val := func(s string) *kgo.Record { return &kgo.Record{Topic: "rides", Value: []byte(s)} }
	k.Produce(clitest.RideChange(0, 5, 1),
		val("[1, 2]"),
		&kgo.Record{Topic: "rides", Value: nil},
		val(""),
		val("{\"change_id\":\"u\",\"entity_id\":\"e\xff\",\"source_version\":1,\"operation\":\"upsert\",\"value\":\"x\"}"),
		val(`{"change_id":"d","entity_id":"e1","source_version":9,"operation":"upsert","value":"a","value":"b"}`),
		val(`{"change_id":"x","entity_id":"e1","source_version":9,"operation":"upsert","value":"a","colour":"red"}`),
		val(`{"change_id":"big","entity_id":"e1","source_version":9,"operation":"upsert","value":"`+strings.Repeat("y", 400)+`"}`),
		clitest.RideChange(1, 5, 1),
		val(`{"change_id":"v","entity_id":"e2","source_version":"x","operation":"upsert","value":"a"}`),
	)
	code, out, errOut := clitest.InProcess(t, "run", jobPath, "--json")
	require.Equal(t, 0, code, out+errOut)
	b := clitest.BatchLines(t, out)
	require.Len(t, b, 1)
	require.Equal(t, "applied", b[0].Decision)
	require.Equal(t, 10, b[0].Records)
	require.Equal(t, map[string]int64{"0": 10}, b[0].Positions)
	require.Equal(t, []string{
		"1 invalid_json", "2 invalid_tombstone", "3 invalid_json", "4 invalid_utf8", "5 invalid_duplicate_field",
		"6 invalid_extra_field", "7 invalid_too_large",
	}, clitest.QueryStrs(t, db, `SELECT concat_ws(' ', r.position, r.outcome) FROM (SELECT unnest(CAST(json_extract(inputs, '$.rejects') AS STRUCT(row BIGINT, "partition" VARCHAR, position BIGINT, outcome VARCHAR, bytes BIGINT, prefix VARCHAR)[])) AS r FROM idem.snapshots WHERE job = 'rides' AND snapshot = 1) ORDER BY r.position`))
	require.Equal(t, []string{"accepted 2", "invalid_duplicate_field 1", "invalid_extra_field 1", "invalid_json 2", "invalid_tombstone 1", "invalid_too_large 1", "invalid_utf8 1", "invalid_version 1"},
		clitest.QueryStrs(t, db, `SELECT outcome || ' ' || count(*) FROM rides_outcomes GROUP BY outcome ORDER BY outcome`))
	require.Equal(t, []string{"e0 1 v0", "e1 2 v1"}, clitest.QueryStrs(t, db, `SELECT concat_ws(' ', entity_id, source_version, value) FROM rides ORDER BY ALL`))
	prefix := clitest.QueryStrs(t, db, `SELECT json_extract_string(inputs, '$.rejects[6].prefix') || ' ' || json_extract_string(inputs, '$.rejects[6].bytes') FROM idem.snapshots WHERE job = 'rides' AND snapshot = 1`)
	require.Equal(t, []string{strconv.Quote(`{"change_id":"big","entity_id":"e1","source_version":9,"operatio`) + " 487"}, prefix)

	require.Len(t, b[0].Rejected, 7)
	require.Equal(t, []string{"rejected 7 record(s): 0:1 invalid_json, 0:2 invalid_tombstone (a tombstone without a message key deletes nothing), 0:3 invalid_json, 0:4 invalid_utf8, 0:5 invalid_duplicate_field, 0:6 invalid_extra_field, 0:7 invalid_too_large"},
		clitest.QueryStrs(t, db, `SELECT message FROM idem.runs WHERE job = 'rides' AND snapshot = 1`))
	k.Produce(val("nope"), clitest.RideChange(2, 5, 1))
	code, out, errOut = clitest.InProcess(t, "run", jobPath)
	require.Equal(t, 0, code, out+errOut)
	require.Contains(t, out, "rides: applied rides:0:10-11 · snapshot 2 · 2 records")
	require.Contains(t, out, "\n  rejected 1 record(s): 0:10 invalid_json\n")
	code, out, errOut = clitest.InProcess(t, "rerun", jobPath, "--snapshot", "1", "--json")
	require.Equal(t, 0, code, out+errOut)
	require.Contains(t, out, `"reproduced":true`)

	// Erasing e1 drops the prefixes that hold it; the others stay.
	code, out, errOut = clitest.InProcess(t, "erase", jobPath, "--key", "e1")
	require.Equal(t, 0, code, out+errOut)
	require.Equal(t, []string{`1 "[1, 2]"`, `2 ""`, `3 ""`, `4 "{\"change_id\":\"u\",\"entity_id\":\"e\xff\",\"source_version\":1,\"operation\""`, "5 ", "6 ", "7 "},
		clitest.QueryStrs(t, db, `SELECT r.position || ' ' || r.prefix FROM (SELECT unnest(CAST(json_extract(inputs, '$.rejects') AS STRUCT(row BIGINT, "partition" VARCHAR, position BIGINT, outcome VARCHAR, bytes BIGINT, prefix VARCHAR)[])) AS r FROM idem.snapshots WHERE job = 'rides' AND snapshot = 1) ORDER BY r.position`))
}

// TestStreamStartLatest: with start = "latest" the first run reads nothing
// and still commits each partition's position at its log end, so the
// records produced before the next scheduled run are all read by it
// (issue 27: they were skipped, run after run, while lag climbed).
func TestStreamStartLatest(t *testing.T) {
	t.Parallel()
	k := clitest.StartKafka(t, 2)
	dir := t.TempDir()
	jobPath := k.JobFile(dir, "start = \"latest\"\n")
	db := filepath.Join(dir, "rides.duckdb")
	for i := range 6 {
		k.Produce(clitest.RideChange(i, 4, 2))
	}
	code, stdout, stderr := clitest.InProcess(t, "run", jobPath, "--json")
	require.Equal(t, 0, code, stderr)
	b := clitest.BatchLines(t, stdout)
	require.Len(t, b, 1)
	require.Equal(t, "applied", b[0].Decision)
	require.Equal(t, "rides:start:0@3,1@3", b[0].BatchID)
	require.Equal(t, 0, b[0].Records)
	require.Equal(t, []string{"0 3", "1 3"}, clitest.QueryStrs(t, db, `SELECT concat_ws(' ', partition, next) FROM idem.positions ORDER BY partition`))
	require.Equal(t, []string{"positions pinned where the stream starts: partition 0 at 3, partition 1 at 3"},
		clitest.QueryStrs(t, db, `SELECT message FROM idem.runs WHERE batch_id = 'rides:start:0@3,1@3'`))

	// Records produced between two scheduled runs are read by the second.
	for i := 6; i < 10; i++ {
		k.Produce(clitest.RideChange(i, 4, 2))
	}
	code, stdout, stderr = clitest.InProcess(t, "run", jobPath, "--json")
	require.Equal(t, 0, code, stderr)
	b = clitest.BatchLines(t, stdout)
	require.Len(t, b, 1)
	require.Equal(t, "rides:0:3-4,1:3-4", b[0].BatchID)
	require.Equal(t, 4, b[0].Records)
	require.Equal(t, map[string]int64{"0": 0, "1": 0}, b[0].Lag)

	// Nothing new: skipped, nothing written.
	before := clitest.CaptureState(t, db)
	code, stdout, stderr = clitest.InProcess(t, "run", jobPath)
	require.Equal(t, 0, code, stderr)
	require.Contains(t, stdout, "rides: skipped")
	require.Equal(t, before, clitest.CaptureState(t, db))
}

// TestStreamErase: idem erase --key on a Kafka job removes the key from
// the target, history, outcomes and the retained batches; both snapshots
// still rerun; a redelivered old record of the key gets outcome erased and
// never comes back, while a later version of it is new data and applies.
func TestStreamErase(t *testing.T) {
	t.Parallel()
	k := clitest.StartKafka(t, 1)
	dir := t.TempDir()
	jobPath := k.JobFile(dir, "")
	db := filepath.Join(dir, "rides.duckdb")
	secret := func(version int, value string) *kgo.Record {
		return &kgo.Record{Topic: "rides", Value: fmt.Appendf(nil, `{"change_id":"x%d","entity_id":"ex","source_version":%d,"operation":"upsert","value":"%s"}`, version, version, value)}
	}
	for i := range 6 {
		k.Produce(clitest.RideChange(i, 3, 1))
	}
	k.Produce(secret(1, "SECRETRIDER1"))
	code, out, errOut := clitest.InProcess(t, "run", jobPath)
	require.Equal(t, 0, code, out+errOut)
	k.Produce(secret(2, "SECRETRIDER2"), clitest.RideChange(6, 3, 1))
	code, out, errOut = clitest.InProcess(t, "run", jobPath)
	require.Equal(t, 0, code, out+errOut)

	code, out, errOut = clitest.InProcess(t, "erase", jobPath, "--key", "ex", "--json")
	require.Equal(t, 0, code, out+errOut)
	require.Contains(t, out, `"snapshot":3`)
	require.Contains(t, out, `"position":2`)
	for _, q := range []string{`SELECT count(*) FROM rides WHERE entity_id = 'ex'`, `SELECT count(*) FROM idem.rides__history WHERE entity_id = 'ex'`,
		`SELECT count(*) FROM rides_outcomes WHERE entity_id = 'ex'`} {
		require.Equal(t, []string{"0"}, clitest.QueryStrs(t, db, q), q)
	}
	clitest.RequireNoPayload(t, db+".inputs", "SECRETRIDER", "")
	for _, s := range []string{"1", "2"} {
		code, out, errOut = clitest.InProcess(t, "rerun", jobPath, "--snapshot", s, "--json")
		require.Equal(t, 0, code, out+errOut)
		require.Contains(t, out, `"reproduced":true`, "snapshot %s", s)
	}

	// The broker redelivers an old record of the key (a producer retry):
	// erased, not applied. A later version is new data.
	k.Produce(secret(1, "SECRETRIDER1"))
	code, out, errOut = clitest.InProcess(t, "run", jobPath)
	require.Equal(t, 0, code, out+errOut)
	// Its outcome row names nothing: neither the key nor the payload.
	require.Equal(t, []string{"erased <nil> <nil>"}, clitest.QueryStrs(t, db, `SELECT outcome || ' ' || coalesce(entity_id, '<nil>') || ' ' || coalesce(value, '<nil>') FROM rides_outcomes WHERE outcome = 'erased'`))
	require.Equal(t, []string{"0"}, clitest.QueryStrs(t, db, `SELECT count(*) FROM rides WHERE entity_id = 'ex'`))
	clitest.RequireNoPayload(t, db+".inputs", "SECRETRIDER", "")
	k.Produce(secret(5, "after"))
	code, out, errOut = clitest.InProcess(t, "run", jobPath)
	require.Equal(t, 0, code, out+errOut)
	require.Equal(t, []string{"ex 5 after"}, clitest.QueryStrs(t, db, `SELECT concat_ws(' ', entity_id, source_version, value) FROM rides WHERE entity_id = 'ex'`))
}

// TestStreamFollowYields: idem erase --wait and idem expire --wait, run
// while idem run --follow holds the database and commits a batch after
// another (a record is produced every 150 ms meanwhile), complete within a
// few batch intervals: the follower lets them have it between batches and
// goes on applying records after them, none lost or doubled. The follower
// ends by --idle-exit once the records stop.
func TestStreamFollowYields(t *testing.T) {
	t.Parallel()
	k := clitest.StartKafka(t, 1)
	dir := t.TempDir()
	jobPath := k.JobFile(dir, "max_records = 5\n[retention]\nkeep_snapshots = 3\n")
	db := filepath.Join(dir, "rides.duckdb")
	for i := range 10 {
		k.Produce(clitest.RideChange(i, 5, 1))
	}
	// Records of entity "tick" while the maintenance commands run, so that
	// the follower is busy (and never idle long enough to end).
	stop, stopped := make(chan struct{}), make(chan int)
	go func() {
		n := 0
		defer func() { stopped <- n }()
		for {
			select {
			case <-stop:
				return
			case <-time.After(150 * time.Millisecond):
			}
			n++
			k.Produce(&kgo.Record{Topic: "rides", Value: fmt.Appendf(nil, `{"change_id":"tick%d","entity_id":"tick","source_version":%d,"operation":"upsert","value":"t%d"}`, n, n, n)})
		}
	}()
	follower := clitest.StartIdem(t, nil, "run", jobPath, "--follow", "--idle-exit", "2s", "--wait", "60s")
	// The follower's first batch commits before the erasure has a row to
	// erase: until then the erasure says the job has no snapshot.
	var erase *clitest.IdemProcess
	deadline := time.Now().Add(time.Minute)
	for {
		erase = clitest.StartIdem(t, nil, "erase", jobPath, "--key", "e3", "--wait", "60s")
		code := erase.Wait(t, 90*time.Second)
		if code == 0 {
			break
		}
		require.Contains(t, erase.Stderr.String(), "has no snapshot yet", "erase exited %d", code)
		if time.Now().After(deadline) {
			_ = follower.Cmd.Process.Kill()
			follower.Wait(t, time.Minute)
			t.Fatalf("the follower committed no batch: %s%s", follower.Stdout.String(), follower.Stderr.String())
		}
		time.Sleep(200 * time.Millisecond)
	}
	require.Less(t, erase.Elapsed, 30*time.Second, "erase waited for the follower to end")
	require.False(t, follower.Exited(), "the follower ended before the erasure: %s", follower.Stderr.String())
	expire := clitest.StartIdem(t, nil, "expire", jobPath, "--wait", "60s")
	require.Equal(t, 0, expire.Wait(t, 90*time.Second), expire.Stderr.String())
	require.Less(t, expire.Elapsed, 30*time.Second, "expire waited for the follower to end")
	require.False(t, follower.Exited(), "the follower ended before the expiry: %s", follower.Stderr.String())
	close(stop)
	ticks := <-stopped
	for i := 10; i < 20; i++ {
		k.Produce(clitest.RideChange(i, 5, 1))
	}
	require.Equal(t, 0, follower.Wait(t, 2*time.Minute), follower.Stderr.String())
	require.Contains(t, follower.Stdout.String(), "rides: let a waiting command have the database for ")
	require.Equal(t, []int64{int64(20 + ticks)}, clitest.QueryInts(t, db, `SELECT next FROM idem.positions WHERE job = 'rides'`))
	// e3's records before the erasure are gone; the ones produced after it
	// are new versions and apply.
	require.Equal(t, []string{"e3 19 v18"}, clitest.QueryStrs(t, db, `SELECT concat_ws(' ', entity_id, source_version, value) FROM rides WHERE entity_id = 'e3'`))
	require.Equal(t, []string{fmt.Sprintf("tick %d t%d", ticks, ticks)}, clitest.QueryStrs(t, db, `SELECT concat_ws(' ', entity_id, source_version, value) FROM rides WHERE entity_id = 'tick'`))
	require.Equal(t, []int64{0}, clitest.QueryInts(t, db, `SELECT count(*) - count(DISTINCT batch_id) FROM idem.ledger WHERE job = 'rides'`))
}

// TestStreamBrokerFaults: the ways a Kafka log moves under a job, one
// after another through the CLI against kfake, each with a poison record
// among valid ones: a partition added (read from its first record), records
// deleted past the position (refused, then read past with --allow-gap,
// logged), the topic deleted and recreated smaller and then larger than
// the committed offsets (refused by its topic ID with every idem table
// unchanged, then read from its first records with --allow-gap, logged).
// At the end every record produced has exactly one outcome or lies in a
// logged gap, and the target is the fold of the accepted records.
func TestStreamBrokerFaults(t *testing.T) {
	t.Parallel()
	k := clitest.StartKafka(t, 2)
	dir := t.TempDir()
	jobPath := k.JobFile(dir, "")
	db := filepath.Join(dir, "rides.duckdb")
	n := 0
	produced := map[string]bool{} // change ids
	rec := func(p int32) *kgo.Record {
		n++
		id := fmt.Sprintf("c%d", n)
		produced[id] = true
		return &kgo.Record{Topic: "rides", Partition: p, Value: fmt.Appendf(nil, `{"change_id":%q,"entity_id":"e%d","source_version":1,"operation":"upsert","value":"v%d"}`, id, n, n)}
	}
	poison := &kgo.Record{Topic: "rides", Value: []byte(`{"change_id":"bad"`)}
	run := func(want int, args ...string) string {
		t.Helper()
		code, out, errOut := clitest.InProcess(t, append([]string{"run", jobPath}, args...)...)
		require.Equal(t, want, code, out+errOut)
		return out + errOut
	}
	refused := func(msg string) {
		t.Helper()
		before := clitest.CaptureState(t, db)
		require.Contains(t, run(3), msg)
		require.Equal(t, before, clitest.CaptureState(t, db))
	}

	k.Produce(rec(0), rec(0), rec(1), poison)
	run(0)
	// A partition added later is read from its first record.
	k.AddPartitions(3)
	k.Produce(rec(2), rec(2), rec(1))
	run(0)
	require.Equal(t, []string{"0 3", "1 2", "2 2"}, clitest.QueryStrs(t, db, `SELECT partition || ' ' || next FROM idem.positions ORDER BY partition`))

	// Records deleted past the position: refused, then read past.
	lost := []string{}
	for range 3 {
		r := rec(0)
		lost = append(lost, fmt.Sprintf("c%d", n))
		k.Produce(r)
	}
	k.Produce(rec(0))
	k.DeleteBefore(0, 6)
	refused("partition 0: committed next position 3, first position the source holds 6 (3 records lost)")
	require.Contains(t, run(0, "--allow-gap"), "gap accepted (--allow-gap): the source no longer held partition 0 positions 3-5 (3 records)")

	// The topic deleted and recreated with fewer records than committed.
	k.Recreate(1)
	k.Produce(rec(0), poison)
	refused("is another log than the one job rides read")
	out := run(0, "--allow-gap")
	require.Contains(t, out, "topic recreated (--allow-gap)")
	require.Contains(t, out, "positions 0@7, 1@2, 2@2 left for the new topic's first records")
	require.Equal(t, []string{"0 2", "1 0", "2 0"}, clitest.QueryStrs(t, db, `SELECT partition || ' ' || next FROM idem.positions ORDER BY partition`))

	// Recreated again, with more records than the committed offsets: the
	// offsets alone would hide it.
	k.Recreate(1)
	for range 5 {
		k.Produce(rec(0))
	}
	refused("is another log than the one job rides read")
	run(0, "--allow-gap")
	require.Equal(t, []string{"0 5", "1 0", "2 0"}, clitest.QueryStrs(t, db, `SELECT partition || ' ' || next FROM idem.positions ORDER BY partition`))
	require.Contains(t, run(0), "skipped")

	// Every record produced has one outcome, but the ones in the logged gap.
	got := clitest.QueryStrs(t, db, `SELECT change_id FROM rides_outcomes WHERE change_id IS NOT NULL ORDER BY ALL`)
	want := []string{}
	for id := range produced {
		if !slices.Contains(lost, id) {
			want = append(want, id)
		}
	}
	slices.Sort(want)
	require.Equal(t, want, got)
	require.Equal(t, []string{"accepted " + strconv.Itoa(len(want)), "invalid_json 2"}, clitest.QueryStrs(t, db, `SELECT outcome || ' ' || count(*) FROM rides_outcomes GROUP BY outcome ORDER BY ALL`))
	require.Equal(t, []int64{int64(len(want))}, clitest.QueryInts(t, db, `SELECT count(*) FROM rides`))
	// Each entity changed once: the fold is the accepted records.
	require.Equal(t, clitest.QueryStrs(t, db, `SELECT entity_id || ' ' || value FROM rides_outcomes WHERE outcome = 'accepted' ORDER BY ALL`),
		clitest.QueryStrs(t, db, `SELECT entity_id || ' ' || value FROM rides WHERE status = 'active' ORDER BY ALL`))
}
