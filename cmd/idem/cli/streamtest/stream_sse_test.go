package streamtest

import (
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idem-dev/idem/cmd/idem/cli/internal/clitest"
	"github.com/stretchr/testify/require"
)

// sseFeed is a server-sent events feed of RideChange messages, event i
// with id i+1, that grows while the test runs. Like a flaky server, each
// connection resends the last few events at or below the Last-Event-ID it
// was given and drops after a few hundred events.
type sseFeed struct {
	mu       sync.Mutex
	events   []string
	grew     chan struct{}
	resend   int
	connects int
	rng      *rand.Rand
}

func newSSEFeed(t *testing.T) (*sseFeed, string) {
	f := &sseFeed{grew: make(chan struct{}), resend: 4, rng: rand.New(rand.NewPCG(5, 18))}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	return f, srv.URL + "/rides"
}

// add appends events n0..n-1 (RideChange over entities in one partition).
func (f *sseFeed) add(from, to, entities int) {
	f.mu.Lock()
	for i := from; i < to; i++ {
		f.events = append(f.events, string(clitest.RideChange(i, entities, 1).Value))
	}
	close(f.grew)
	f.grew = make(chan struct{})
	f.mu.Unlock()
}

func (f *sseFeed) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	last, _ := strconv.Atoi(r.Header.Get("Last-Event-ID"))
	f.mu.Lock()
	f.connects++
	drop := 200 + f.rng.IntN(200)
	f.mu.Unlock()
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	fl := w.(http.Flusher)
	fmt.Fprint(w, "retry: 50\n\n")
	next := max(last-f.resend, 0) // resend the last few
	sent := 0
	for {
		f.mu.Lock()
		events, grew := f.events, f.grew
		f.mu.Unlock()
		for ; next < len(events); next++ {
			fmt.Fprintf(w, "id: %d\ndata: %s\n\n", next+1, events[next])
			if sent++; sent >= drop {
				fl.Flush()
				return // drop the connection
			}
		}
		fl.Flush()
		select {
		case <-grew:
		case <-r.Context().Done():
			return
		case <-time.After(2 * time.Second):
			fmt.Fprint(w, ": keep-alive\n\n")
			fl.Flush()
		}
	}
}

// sseJobFile writes a versioned_changes job reading the feed.
func sseJobFile(t *testing.T, dir, url, extra string) string {
	p := filepath.Join(dir, "rides.toml")
	clitest.WriteFile(t, p, fmt.Sprintf("name = \"rides\"\npipeline = \"versioned_changes\"\ntransform_version = 1\nschema_version = 1\ndatabase = \"rides.duckdb\"\n[input]\nkind = \"sse\"\nurl = %q\nmax_wait = \"300ms\"\n%s[target]\ntable = \"rides\"\n"+clitest.DuckdbSection, url, extra))
	return p
}

// serveSSE serves body as a text/event-stream to every connection, which
// it then holds open until the client goes; it returns the feed's URL.
func serveSSE(t *testing.T, body string) string {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, body)
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	})
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.URL
}

// TestStreamSSE: a run reads the events past the committed id, skips what
// a reconnecting server resends, commits the last id with the batch, and
// a later run resumes from it with Last-Event-ID.
func TestStreamSSE(t *testing.T) {
	t.Parallel()
	feed, url := newSSEFeed(t)
	dir := t.TempDir()
	jobPath := sseJobFile(t, dir, url, "max_records = 250\n")
	db := filepath.Join(dir, "rides.duckdb")
	feed.add(0, 1000, 50)
	code, stdout, stderr := clitest.InProcess(t, "run", jobPath, "--follow", "--idle-exit", "1s", "--json")
	require.Equal(t, 0, code, stderr)
	b := clitest.BatchLines(t, stdout)
	require.Len(t, b, 4)
	require.Equal(t, "rides::1-250", b[0].BatchID)
	require.Equal(t, []string{" 1001"}, clitest.QueryStrs(t, db, `SELECT concat_ws(' ', partition, next) FROM idem.positions WHERE job = 'rides'`))
	feed.add(1000, 1300, 50)
	code, stdout, stderr = clitest.InProcess(t, "run", jobPath, "--json")
	require.Equal(t, 0, code, stderr)
	b = clitest.BatchLines(t, stdout)
	require.Len(t, b, 1)
	require.Equal(t, "applied", b[0].Decision)
	require.Equal(t, "rides::1001-1250", b[0].BatchID)
	code, _, stderr = clitest.InProcess(t, "run", jobPath, "--follow", "--idle-exit", "1s")
	require.Equal(t, 0, code, stderr)
	require.Equal(t, []int64{1300, 1300}, clitest.QueryInts(t, db, `SELECT count(*) FROM rides_outcomes UNION ALL SELECT count(DISTINCT change_id) FROM rides_outcomes`))
	require.Equal(t, clitest.FoldRides(1300, 50), clitest.QueryStrs(t, db, `SELECT concat_ws(' ', entity_id, source_version, value) FROM rides ORDER BY entity_id`))
	require.Equal(t, []int64{1301}, clitest.QueryInts(t, db, `SELECT next FROM idem.positions`))
	require.Greater(t, feed.connects, 5, "the server dropped and resent")
	code, stdout, stderr = clitest.InProcess(t, "rerun", jobPath, "--snapshot", "2")
	require.Equal(t, 0, code, stdout+stderr)
}

// TestStreamSSEKillFollow is TestStreamKillFollow over server-sent events
// from a server that drops the connection every few hundred events and
// resends the last few: SIGKILL idem at random moments and at the
// commit's fault points, restart it; at the end every event has exactly
// one outcome, the target is one pass over every event and the committed
// id is the feed's last. By default 6 kills (the four fault points and two
// random delays) over 3,000 events; IDEM_LONG=1: 20 kills over 50,000
// events (IDEM_KILL_TRIALS=N sets the number of kills).
func TestStreamSSEKillFollow(t *testing.T) {
	t.Parallel()
	trials := clitest.KillTrials(t, 6, 20)
	n := clitest.LongOr(3000, 50000)
	const entities = 500
	feed, url := newSSEFeed(t)
	work := t.TempDir()
	jobPath := sseJobFile(t, work, url, "max_records = 500\n")
	dbPath := filepath.Join(work, "rides.duckdb")

	var wg sync.WaitGroup
	wg.Add(1)
	chunk := max(n/(trials*8), 50)
	go func() {
		defer wg.Done()
		for i := 0; i < n; i += chunk {
			feed.add(i, min(i+chunk, n), entities)
			time.Sleep(100 * time.Millisecond)
		}
	}()
	killed, one, _ := clitest.KillFollow(t, work, jobPath, trials, wg.Wait)
	batches := clitest.QueryInts(t, dbPath, `SELECT count(*) FROM idem.ledger WHERE job = 'rides'`)[0]
	t.Logf("%d kills of %d trials (a batch took %s), %d events, %d batches, %d connections", killed, trials, one.Round(time.Millisecond), n, batches, feed.connects)
	require.GreaterOrEqual(t, killed, trials/2, "most trials must end in a SIGKILL")

	require.Equal(t, []int64{int64(n), int64(n)}, clitest.QueryInts(t, dbPath, `SELECT count(*) FROM rides_outcomes UNION ALL SELECT count(DISTINCT change_id) FROM rides_outcomes`))
	require.Equal(t, []string{}, clitest.QueryStrs(t, dbPath, `SELECT concat_ws(' ', change_id, outcome, batch_id) FROM rides_outcomes WHERE outcome NOT IN ('accepted', 'superseded_in_batch')`))
	require.Equal(t, clitest.FoldRides(n, entities), clitest.QueryStrs(t, dbPath, `SELECT concat_ws(' ', entity_id, source_version, value) FROM rides ORDER BY entity_id`))
	require.Equal(t, []int64{int64(n + 1)}, clitest.QueryInts(t, dbPath, `SELECT next FROM idem.positions`))
	require.Equal(t, []int64{0}, clitest.QueryInts(t, dbPath, `SELECT count(*) - count(DISTINCT batch_id) FROM idem.ledger WHERE job = 'rides'`))
}

// TestStreamSSEBadEvents: an SSE feed's events of a type not in events =
// [...] are passed over and counted (outcome skipped_event, no data kept);
// an event whose data is not one JSON object, is
// invalid UTF-8 or is past max_record_bytes is an invalid_* outcome naming
// its id, and the batch commits past it.
func TestStreamSSEBadEvents(t *testing.T) {
	t.Parallel()
	good := func(i int) string { return string(clitest.RideChange(i, 5, 1).Value) }
	body := "id: 1\ndata: " + good(0) + "\n\n" +
		"id: 2\nevent: ping\ndata: not json\n\n" +
		"id: 3\ndata: [1]\n\n" +
		"id: 4\ndata: {\"change_id\":\"u\",\"value\":\"\xff\"}\n\n" +
		"id: 5\ndata: {\"change_id\":\"big\",\n" + strings.Repeat("data: "+strings.Repeat("y", 99)+"\n", 4) + "\n" +
		"id: 6\ndata: " + good(1) + "\n\n"
	dir := t.TempDir()
	jobPath := sseJobFile(t, dir, serveSSE(t, body), "max_record_bytes = 300\nevents = [\"message\"]\n")
	db := filepath.Join(dir, "rides.duckdb")
	code, out, errOut := clitest.InProcess(t, "run", jobPath)
	require.Equal(t, 0, code, out+errOut)
	require.Contains(t, out, "rides: applied rides::1-6 · snapshot 1 · 6 records")
	require.Contains(t, out, "\n  rejected 3 record(s): :3 invalid_json, :4 invalid_utf8, :5 invalid_too_large; passed over 1 event(s) of a type [input] events does not select (outcome skipped_event)\n")
	require.Equal(t, []string{"accepted 2", "invalid_json 1", "invalid_too_large 1", "invalid_utf8 1", "skipped_event 1"},
		clitest.QueryStrs(t, db, `SELECT outcome || ' ' || count(*) FROM rides_outcomes GROUP BY outcome ORDER BY outcome`))
	require.Equal(t, []int64{7}, clitest.QueryInts(t, db, `SELECT next FROM idem.positions WHERE job = 'rides'`))
	require.Equal(t, []string{"419"}, clitest.QueryStrs(t, db, `SELECT json_extract_string(inputs, '$.rejects[3].bytes') FROM idem.snapshots WHERE job = 'rides' AND snapshot = 1`))
}

// TestStreamInProject: a project holding a stream job runs it as the job
// alone runs: its batch printed (one object of the --json array), then
// nothing new; --follow fails the project's job that reads no stream
// (exit 2, naming it) and still follows the stream job, until idle.
func TestStreamInProject(t *testing.T) {
	t.Parallel()
	good := func(i int) string { return string(clitest.RideChange(i, 5, 1).Value) }
	dir := t.TempDir()
	sseJobFile(t, dir, serveSSE(t, "id: 1\ndata: "+good(0)+"\n\nid: 2\ndata: "+good(1)+"\n\n"), "")
	clitest.WriteFile(t, filepath.Join(dir, "in.csv"), "id,v\n1,a\n")
	clitest.WriteFile(t, filepath.Join(dir, "src.toml"), "name = \"src\"\npipeline = \"merge_by_key\"\ntransform_version = 1\nschema_version = 1\n"+
		"database = \"rides.duckdb\"\n[input]\npath = \"in.csv\"\n[input.columns]\nid = \"BIGINT\"\nv = \"VARCHAR\"\n[target]\nkey = [\"id\"]\n"+clitest.DuckdbSection)

	code, out, errOut := clitest.InProcess(t, "run", dir, "--json", "--jobs", "2")
	require.Equal(t, 0, code, out+errOut)
	var objs []map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &objs), out)
	require.Len(t, objs, 2)
	byJob := map[string]map[string]any{}
	for _, o := range objs {
		byJob[o["job"].(string)] = o
	}
	require.Equal(t, "rides::1-2", byJob["rides"]["batch_id"], out)
	require.EqualValues(t, 2, byJob["rides"]["records"], out)
	require.Equal(t, "applied", byJob["src"]["decision"], out)

	code, out, errOut = clitest.InProcess(t, "run", dir, "--jobs", "2")
	require.Equal(t, 0, code, out+errOut)
	require.Contains(t, out, "rides: skipped: nothing new past the committed positions\n")
	require.Contains(t, out, "src: already_committed\n")

	code, out, errOut = clitest.InProcess(t, "run", dir, "--follow", "--idle-exit", "300ms", "--jobs", "1")
	require.Equal(t, 2, code, out+errOut)
	require.Contains(t, errOut, `idem: --follow and --allow-gap apply to a job reading a stream ([input] kind = "kafka"); src reads files`)
	require.NotContains(t, out, "src:")
}
