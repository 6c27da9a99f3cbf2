package streamtest

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/idem-dev/idem/cmd/idem/cli/internal/clitest"
)

// loneSurrogate is a RideChange-like record whose value holds a \ud800
// escape without its low half: encoding/json takes it (as U+FFFD), DuckDB's
// JSON reader refuses it, and with it the whole batch.
const loneSurrogate = `{"change_id":"s","entity_id":"e1","source_version":7,"operation":"upsert","value":"x\ud800"}`

// TestStreamLoneSurrogate: a Kafka record holding a lone surrogate among
// valid ones is an invalid_unicode outcome naming its partition and
// offset; the batch commits past it and later runs, --follow too, read on.
// It used to fail the batch (exit 1) on every run, the stream blocked for
// good.
func TestStreamLoneSurrogate(t *testing.T) {
	t.Parallel()
	k := clitest.StartKafka(t, 1)
	dir := t.TempDir()
	jobPath := k.JobFile(dir, "")
	db := filepath.Join(dir, "rides.duckdb")
	k.Produce(clitest.RideChange(0, 5, 1), &kgo.Record{Topic: "rides", Value: []byte(loneSurrogate)}, clitest.RideChange(1, 5, 1))
	code, out, errOut := clitest.InProcess(t, "run", jobPath)
	require.Equal(t, 0, code, out+errOut)
	require.Contains(t, out, "rides: applied rides:0:0-2 · snapshot 1 · 3 records")
	require.Contains(t, out, "\n  rejected 1 record(s): 0:1 invalid_unicode\n")

	k.Produce(&kgo.Record{Topic: "rides", Value: []byte(loneSurrogate)}, clitest.RideChange(2, 5, 1))
	code, out, errOut = clitest.InProcess(t, "run", jobPath, "--follow", "--idle-exit", "500ms")
	require.Equal(t, 0, code, out+errOut)
	require.Contains(t, out, "rejected 1 record(s): 0:3 invalid_unicode")
	require.Equal(t, []string{"accepted 3", "invalid_unicode 2"},
		clitest.QueryStrs(t, db, `SELECT outcome || ' ' || count(*) FROM rides_outcomes GROUP BY outcome ORDER BY outcome`))
	require.Equal(t, []int64{5}, clitest.QueryInts(t, db, `SELECT next FROM idem.positions WHERE job = 'rides'`))
	code, out, errOut = clitest.InProcess(t, "rerun", jobPath, "--snapshot", "1", "--json")
	require.Equal(t, 0, code, out+errOut)
	require.Contains(t, out, `"reproduced":true`)
}

// TestStreamSSELoneSurrogateAndPings: on an SSE feed with events =
// ["message"], heartbeat events of another type without an id (event:
// ping, before, between and after the records) are passed over, where the
// run stopped with exit 3 asking for an id; an event whose data holds a
// lone surrogate is an invalid_unicode outcome naming its id, where the
// batch failed (exit 1) on every run.
func TestStreamSSELoneSurrogateAndPings(t *testing.T) {
	t.Parallel()
	good := func(i int) string { return string(clitest.RideChange(i, 5, 1).Value) }
	ping := "event: ping\ndata: {}\n\n"
	body := ping + "id: 1\ndata: " + good(0) + "\n\n" + ping +
		"id: 2\ndata: " + loneSurrogate + "\n\n" + ping +
		"id: 3\ndata: " + good(1) + "\n\n" + ping
	dir := t.TempDir()
	jobPath := sseJobFile(t, dir, serveSSE(t, body), "events = [\"message\"]\n")
	db := filepath.Join(dir, "rides.duckdb")
	code, out, errOut := clitest.InProcess(t, "run", jobPath)
	require.Equal(t, 0, code, out+errOut)
	require.Contains(t, out, "rides: applied rides::1-3 · snapshot 1 · 3 records")
	require.Contains(t, out, "\n  rejected 1 record(s): :2 invalid_unicode\n")
	require.Equal(t, []string{"accepted 2", "invalid_unicode 1"},
		clitest.QueryStrs(t, db, `SELECT outcome || ' ' || count(*) FROM rides_outcomes GROUP BY outcome ORDER BY outcome`))
	require.Equal(t, []int64{4}, clitest.QueryInts(t, db, `SELECT next FROM idem.positions WHERE job = 'rides'`))
	code, out, errOut = clitest.InProcess(t, "run", jobPath)
	require.Equal(t, 0, code, out+errOut)
}
