package source

import (
	"context"
	"fmt"
	"io"
	"math/rand"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idem-dev/idem/internal/report"
)

func TestSSEBackoff(t *testing.T) {
	t.Parallel()
	ms := time.Millisecond
	cases := []struct {
		name           string
		min, max, retr time.Duration
		hasRetry       bool
		failures       int
		want           time.Duration
	}{
		{"first", 100 * ms, 10000 * ms, 0, false, 0, 100 * ms},
		{"doubles", 100 * ms, 10000 * ms, 0, false, 3, 800 * ms},
		{"capped", 100 * ms, 1000 * ms, 0, false, 10, 1000 * ms},
		{"many failures stay capped", 100 * ms, 1000 * ms, 0, false, 1000, 1000 * ms},
		{"retry replaces min", 100 * ms, 10000 * ms, 300 * ms, true, 0, 300 * ms},
		{"retry doubles", 100 * ms, 10000 * ms, 300 * ms, true, 2, 1200 * ms},
		{"retry above max", 100 * ms, 1000 * ms, 5000 * ms, true, 3, 5000 * ms},
		{"retry zero reconnects at once", 100 * ms, 1000 * ms, 0, true, 0, 0},
		{"retry zero then backs off", 100 * ms, 1000 * ms, 0, true, 2, 200 * ms},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			require.Equal(t, c.want, backoff(c.min, c.max, c.retr, c.hasRetry, c.failures))
		})
	}
}

// sseFeed serves events 1..n, each {"n":id}, from the one after the
// request's Last-Event-ID, less resend (a server that resends the last few
// after a reconnect). With drop it ends each connection after drop() events,
// alternately by ending the response and by aborting the connection. Once
// all n are sent, it holds the connection open.
type sseFeed struct {
	n      int64
	resend int64
	drop   func() int

	mu      sync.Mutex
	headers []string // each connection's Last-Event-ID, "none" when absent
	starts  []time.Time
	resent  int
}

func (f *sseFeed) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	h, ok := r.Header["Last-Event-Id"]
	if ok {
		f.headers = append(f.headers, h[0])
	} else {
		f.headers = append(f.headers, "none")
	}
	f.starts = append(f.starts, time.Now())
	conn := len(f.headers)
	limit := -1
	if f.drop != nil {
		limit = f.drop()
	}
	f.mu.Unlock()
	after := int64(0)
	if ok {
		after, _ = strconv.ParseInt(h[0], 10, 64)
	}
	start := max(after+1-f.resend, 1)
	w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
	w.WriteHeader(http.StatusOK)
	fl := w.(http.Flusher)
	sent := 0
	for id := start; id <= f.n; id++ {
		if sent == limit {
			if conn%2 == 0 {
				panic(http.ErrAbortHandler)
			}
			return
		}
		fmt.Fprintf(w, "id: %d\ndata: {\"n\":%d}\n\n", id, id)
		sent++
		if id <= after {
			f.mu.Lock()
			f.resent++
			f.mu.Unlock()
		}
	}
	fl.Flush()
	<-r.Context().Done()
}

func (f *sseFeed) conns() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.headers...)
}

func fastSSE() SSEOptions {
	return SSEOptions{MinBackoff: time.Millisecond, MaxBackoff: 20 * time.Millisecond}
}

func newTestSSE(t *testing.T, h http.Handler, opts SSEOptions) (*SSEReader, string) {
	srv := httptest.NewServer(h)
	r := NewSSEReader(srv.URL+"/prices", opts)
	t.Cleanup(func() {
		r.Close()
		srv.Close()
	})
	return r, srv.URL + "/prices"
}

func positions(recs []Record) []int64 {
	var out []int64
	for _, r := range recs {
		out = append(out, r.Position)
	}
	return out
}

func span(from, to int64) []int64 {
	var out []int64
	for i := from; i <= to; i++ {
		out = append(out, i)
	}
	return out
}

func TestSSERecords(t *testing.T) {
	t.Parallel()
	// The wire split anywhere, a CR ending one write and its LF the next,
	// and a last event ended by CRs alone: Read must not wait for more.
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fl := w.(http.Flusher)
		for _, part := range []string{"\xEF\xBB\xBF: hi\r", "\nid: 7\r", "\ndata: {\"a\":", "1}\r", "\n\r", "\nevent: ping\nid: 8\ndata: {}\n\n", "id: 9\rdata: {\"b\":\rdata: 2}\r\r"} {
			io.WriteString(w, part)
			fl.Flush()
			time.Sleep(5 * time.Millisecond)
		}
		<-r.Context().Done()
	})
	r, _ := newTestSSE(t, h, fastSSE())
	began := time.Now()
	recs, gaps, err := r.Read(context.Background(), nil, 3, 10*time.Second)
	require.NoError(t, err)
	require.Empty(t, gaps)
	require.Less(t, time.Since(began), 5*time.Second)
	require.Equal(t, []Record{
		{Partition: "", Position: 7, Value: []byte(`{"a":1}`)},
		{Partition: "", Position: 8, Value: []byte(`{}`)},
		{Partition: "", Position: 9, Value: []byte("{\"b\":\n2}")},
	}, recs)
}

func TestSSEEventsOption(t *testing.T) {
	t.Parallel()
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "event: ping\ndata: {}\n\nevent: ping\nid: 1\ndata: not json\n\nid: 2\ndata: {\"a\":2}\n\nevent: ping\ndata: x\n\nevent: price\nid: 3\ndata: {\"a\":3}\n\n")
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	})
	opts := fastSSE()
	opts.Events = []string{"message", "price"}
	r, _ := newTestSSE(t, h, opts)
	recs, _, err := r.Read(context.Background(), nil, 3, 10*time.Second)
	require.NoError(t, err)
	// The ping with an id is passed on without its data, marked skipped:
	// it gets an outcome (skipped_event) and the position moves past it.
	// The pings without an id have no position: they are passed over.
	require.Equal(t, []Record{
		{Position: 1, Skipped: true},
		{Position: 2, Value: []byte(`{"a":2}`)},
		{Position: 3, Value: []byte(`{"a":3}`)},
	}, recs)
}

func TestSSELastEventID(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		next  map[string]int64
		want  []int64
		heads []string
	}{
		{"nothing committed sends no header", nil, span(1, 10), []string{"none", "4"}},
		{"next 0 sends no header", map[string]int64{"": 0}, span(1, 10), []string{"none", "4"}},
		{"next 1", map[string]int64{"": 1}, span(1, 10), []string{"0", "4"}},
		{"next 3", map[string]int64{"": 3}, span(3, 10), []string{"2", "6"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			f := &sseFeed{n: 10, drop: func() int { return 4 }}
			r, _ := newTestSSE(t, f, fastSSE())
			recs, _, err := r.Read(context.Background(), c.next, len(c.want), 10*time.Second)
			require.NoError(t, err)
			require.Equal(t, c.want, positions(recs))
			require.Equal(t, c.heads, f.conns()[:2])
		})
	}
}

// TestSSEDropsAndResends reads 5,000 events from a server that drops the
// connection every few hundred events and resends the last few after each
// reconnect: each id comes exactly once, in order.
func TestSSEDropsAndResends(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewSource(18))
	var mu sync.Mutex
	f := &sseFeed{n: 5000, resend: 5, drop: func() int {
		mu.Lock()
		defer mu.Unlock()
		return 200 + rng.Intn(200)
	}}
	r, _ := newTestSSE(t, f, fastSSE())
	next := map[string]int64{}
	var got []int64
	deadline := time.Now().Add(15 * time.Second)
	for int64(len(got)) < f.n && time.Now().Before(deadline) {
		recs, _, err := r.Read(context.Background(), next, 700, 2*time.Second)
		require.NoError(t, err)
		for _, rec := range recs {
			require.JSONEq(t, fmt.Sprintf(`{"n":%d}`, rec.Position), string(rec.Value))
		}
		got = append(got, positions(recs)...)
		if len(recs) > 0 {
			next[""] = recs[len(recs)-1].Position + 1
		}
	}
	require.Equal(t, span(1, 5000), got)
	require.GreaterOrEqual(t, len(f.conns()), 12)
	f.mu.Lock()
	require.Greater(t, f.resent, 0)
	f.mu.Unlock()
}

// TestSSERetry measures the reconnect delay the server asked for.
func TestSSERetry(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var ended, second time.Time
	conn := 0
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		conn++
		n := conn
		if n == 2 {
			second = time.Now()
		}
		mu.Unlock()
		w.Header().Set("Content-Type", "text/event-stream")
		if n == 1 {
			io.WriteString(w, "retry: 300\nid: 1\ndata: {}\n\n")
			w.(http.Flusher).Flush()
			mu.Lock()
			ended = time.Now()
			mu.Unlock()
			return
		}
		io.WriteString(w, "id: 2\ndata: {}\n\n")
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	})
	r, _ := newTestSSE(t, h, fastSSE())
	recs, _, err := r.Read(context.Background(), nil, 2, 10*time.Second)
	require.NoError(t, err)
	require.Equal(t, []int64{1, 2}, positions(recs))
	mu.Lock()
	d := second.Sub(ended)
	mu.Unlock()
	require.GreaterOrEqual(t, d, 300*time.Millisecond)
	require.Less(t, d, 2*time.Second)
}

func TestSSERefusals(t *testing.T) {
	t.Parallel()
	const fix = "the server must send an id: line with every event, a base-10 integer that increases along the feed"
	cases := []struct {
		name string
		body string
		want []string
	}{
		{"event without an id", "id: 1\ndata: {}\n\ndata: {\"b\":2}\n\n", []string{`an event without an id (after id 1, data "{\"b\":2}")`, fix}},
		{"id with NUL is no id", "id: 1\x00\ndata: {}\n\n", []string{"an event without an id (after id -1", fix}},
		{"id not an integer", "id: 1\ndata: {}\n\nid: abc\ndata: {}\n\n", []string{`event id "abc" is not a base-10 integer`, fix}},
		{"negative id", "id: -3\ndata: {}\n\n", []string{`event id "-3" is not a base-10 integer`, fix}},
		{"decimal id", "id: 1.5\ndata: {}\n\n", []string{`event id "1.5" is not a base-10 integer`, fix}},
		{"empty id", "id:\ndata: {}\n\n", []string{`event id "" is not a base-10 integer`, fix}},
		{"id at int64 max", "id: 9223372036854775806\ndata: {}\n\nid: 9223372036854775807\ndata: {}\n\n", []string{"event id 9223372036854775807 is beyond the ids idem can record (at most 9223372036854775806", fix}},
		{"id past int64", "id: 99999999999999999999\ndata: {}\n\n", []string{"event id 99999999999999999999 is beyond the ids idem can record", fix}},
		{"decreasing id", "id: 5\ndata: {}\n\nid: 4\ndata: {}\n\n", []string{"event id 4 after id 5 on one connection does not increase", fix}},
		{"repeated id", "id: 5\ndata: {}\n\nid: 5\ndata: {}\n\n", []string{"event id 5 after id 5 on one connection does not increase", fix}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "text/event-stream")
				io.WriteString(w, c.body)
				w.(http.Flusher).Flush()
				<-r.Context().Done()
			})
			r, url := newTestSSE(t, h, fastSSE())
			recs, _, err := r.Read(context.Background(), nil, 10, 10*time.Second)
			require.Error(t, err)
			require.Nil(t, recs, "nothing is returned, so nothing is committed")
			var re *report.RefusedError
			require.ErrorAs(t, err, &re)
			require.Equal(t, "stream", re.Guard)
			require.Equal(t, report.ExitRefused, report.ExitCode(err))
			require.Contains(t, err.Error(), "sse "+url+": ")
			for _, w := range c.want {
				require.Contains(t, err.Error(), w)
			}
			// The refusal stays: the next Read from the same place says it again.
			_, _, err2 := r.Read(context.Background(), nil, 10, time.Second)
			require.Equal(t, err.Error(), err2.Error())
		})
	}
}

func TestSSEStatus(t *testing.T) {
	t.Parallel()
	statusThenFeed := func(codes ...int) http.Handler {
		var mu sync.Mutex
		n := 0
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			i := n
			n++
			mu.Unlock()
			if i < len(codes) {
				w.WriteHeader(codes[i])
				return
			}
			w.Header().Set("Content-Type", "text/event-stream")
			io.WriteString(w, "id: 1\ndata: {}\n\n")
			w.(http.Flusher).Flush()
			<-r.Context().Done()
		})
	}
	cases := []struct {
		name    string
		h       http.Handler
		want    []int64
		err     string // "" no error
		stopped bool
	}{
		{"204 says stop", statusThenFeed(204), nil, "", true},
		{"5xx retried", statusThenFeed(503, 500, 502), []int64{1}, "", false},
		{"404 is an error", statusThenFeed(404), nil, "404 Not Found: the server refused the request", false},
		{"401 is an error", statusThenFeed(401), nil, "401 Unauthorized", false},
		{"not an event stream", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, "{}")
		}), nil, `content type "application/json", want text/event-stream`, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			r, url := newTestSSE(t, c.h, fastSSE())
			began := time.Now()
			recs, _, err := r.Read(context.Background(), nil, 1, 10*time.Second)
			require.Less(t, time.Since(began), 5*time.Second, "returns without waiting for maxWait")
			require.Equal(t, c.want, positions(recs))
			if c.err == "" {
				require.NoError(t, err)
			} else {
				require.ErrorContains(t, err, "sse "+url+": ")
				require.ErrorContains(t, err, c.err)
				require.Equal(t, report.ExitFailure, report.ExitCode(err))
			}
			require.Equal(t, c.stopped, r.Stopped())
		})
	}
}

// TestSSEStopAfterEvents: events, then a reconnect answered 204. Read
// returns the events at once, then nothing, and Stopped says so.
func TestSSEStopAfterEvents(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	conn := 0
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		conn++
		n := conn
		mu.Unlock()
		if n > 1 {
			w.WriteHeader(http.StatusNoContent)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "id: 1\ndata: {}\n\nid: 2\ndata: {}\n\nid: 3\ndata: {}\n\n")
	})
	r, _ := newTestSSE(t, h, fastSSE())
	began := time.Now()
	recs, _, err := r.Read(context.Background(), nil, 10, 10*time.Second)
	require.NoError(t, err)
	require.Equal(t, []int64{1, 2, 3}, positions(recs))
	require.True(t, r.Stopped())
	recs, _, err = r.Read(context.Background(), map[string]int64{"": 4}, 10, 10*time.Second)
	require.NoError(t, err)
	require.Empty(t, recs)
	require.Less(t, time.Since(began), 5*time.Second)
}

// TestSSEMaxAndMaxWait: Read returns at most max, keeps the connection (and
// what it read past max) for the next Read, returns after maxWait with
// fewer, and reconnects from next when the caller goes back.
func TestSSEMaxAndMaxWait(t *testing.T) {
	t.Parallel()
	f := &sseFeed{n: 10}
	opts := fastSSE()
	opts.Buffer = 2 // read ahead less than max: the rest waits in the connection
	r, _ := newTestSSE(t, f, opts)
	ctx := context.Background()

	recs, _, err := r.Read(ctx, nil, 4, 10*time.Second)
	require.NoError(t, err)
	require.Equal(t, span(1, 4), positions(recs))
	recs, _, err = r.Read(ctx, map[string]int64{"": 5}, 4, 10*time.Second)
	require.NoError(t, err)
	require.Equal(t, span(5, 8), positions(recs))
	began := time.Now()
	recs, _, err = r.Read(ctx, map[string]int64{"": 9}, 4, 300*time.Millisecond)
	waited := time.Since(began)
	require.NoError(t, err)
	require.Equal(t, span(9, 10), positions(recs))
	require.GreaterOrEqual(t, waited, 300*time.Millisecond)
	require.Less(t, waited, 3*time.Second)
	require.Equal(t, []string{"none"}, f.conns(), "one connection for the three Reads")

	// Nothing new: an empty Read after maxWait, no error.
	recs, _, err = r.Read(ctx, map[string]int64{"": 11}, 4, 100*time.Millisecond)
	require.NoError(t, err)
	require.Empty(t, recs)

	// The caller did not commit 3..10: it reads them again.
	recs, _, err = r.Read(ctx, map[string]int64{"": 3}, 2, 10*time.Second)
	require.NoError(t, err)
	require.Equal(t, span(3, 4), positions(recs))
	require.Equal(t, []string{"none", "2"}, f.conns())
}

func TestSSEContext(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		n    int64
		want []int64
		err  error
	}{
		{"nothing read", 0, nil, context.Canceled},
		{"records read", 2, []int64{1, 2}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			r, _ := newTestSSE(t, &sseFeed{n: c.n}, fastSSE())
			ctx, cancel := context.WithCancel(context.Background())
			time.AfterFunc(200*time.Millisecond, cancel)
			began := time.Now()
			recs, _, err := r.Read(ctx, nil, 10, 30*time.Second)
			require.Less(t, time.Since(began), 5*time.Second)
			require.Equal(t, c.want, positions(recs))
			if c.err == nil {
				require.NoError(t, err)
			} else {
				require.ErrorIs(t, err, c.err)
			}
		})
	}
}

func TestSSEUnreachable(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL + "/prices"
	srv.Close()
	r := NewSSEReader(url, SSEOptions{MinBackoff: 10 * time.Millisecond, MaxBackoff: 50 * time.Millisecond})
	defer r.Close()
	recs, _, err := r.Read(context.Background(), nil, 10, 300*time.Millisecond)
	require.Empty(t, recs)
	require.ErrorIs(t, err, ErrSSEUnreachable)
	require.ErrorContains(t, err, "sse "+url+": ")
	require.ErrorContains(t, err, "still retrying")
}

// TestSSECloseLeavesNoGoroutine is not parallel: it counts goroutines.
func TestSSECloseLeavesNoGoroutine(t *testing.T) {
	before := runtime.NumGoroutine()
	f := &sseFeed{n: 3000, resend: 2, drop: func() int { return 500 }}
	srv := httptest.NewServer(f)
	r := NewSSEReader(srv.URL, fastSSE())
	recs, _, err := r.Read(context.Background(), nil, 1000, 10*time.Second)
	require.NoError(t, err)
	require.Len(t, recs, 1000)
	require.NoError(t, r.Close())
	_, _, err = r.Read(context.Background(), nil, 1, time.Second)
	require.ErrorContains(t, err, "read after close")
	srv.Close()

	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	buf := make([]byte, 1<<20)
	stacks := string(buf[:runtime.Stack(buf, true)])
	require.NotContains(t, stacks, "sseSession")
	require.LessOrEqual(t, runtime.NumGoroutine(), before, stacks)
}

// TestSSEIdleTimeout: a connection that goes silent is dropped and
// reconnected; heartbeat comments keep it, and so does waiting for Read.
func TestSSEIdleTimeout(t *testing.T) {
	t.Parallel()
	serve := func(heartbeat bool) (http.Handler, *sseFeed) {
		f := &sseFeed{}
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			f.mu.Lock()
			f.headers = append(f.headers, r.Header.Get("Last-Event-ID"))
			n := len(f.headers)
			f.mu.Unlock()
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprintf(w, "id: %d\ndata: {}\n\n", n)
			w.(http.Flusher).Flush()
			for {
				select {
				case <-r.Context().Done():
					return
				case <-time.After(40 * time.Millisecond):
				}
				if heartbeat {
					io.WriteString(w, ":\n")
					w.(http.Flusher).Flush()
				}
			}
		}), f
	}
	cases := []struct {
		name      string
		heartbeat bool
		want      []int64
		heads     []string
	}{
		{"silent connection reconnected", false, []int64{1, 2}, []string{"", "1"}},
		{"heartbeats keep it", true, []int64{1}, []string{""}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			h, f := serve(c.heartbeat)
			opts := fastSSE()
			opts.IdleTimeout = 250 * time.Millisecond
			r, _ := newTestSSE(t, h, opts)
			recs, _, err := r.Read(context.Background(), nil, 2, 800*time.Millisecond)
			require.NoError(t, err)
			require.Equal(t, c.want, positions(recs))
			require.Equal(t, c.heads, f.conns()[:len(c.heads)])
			if c.heartbeat {
				require.Len(t, f.conns(), 1)
			}
		})
	}

	t.Run("waiting for Read is not idle", func(t *testing.T) {
		t.Parallel()
		f := &sseFeed{n: 5}
		opts := fastSSE()
		opts.Buffer = 1
		opts.IdleTimeout = 100 * time.Millisecond
		r, _ := newTestSSE(t, f, opts)
		recs, _, err := r.Read(context.Background(), nil, 1, 5*time.Second)
		require.NoError(t, err)
		require.Equal(t, []int64{1}, positions(recs))
		time.Sleep(400 * time.Millisecond)
		recs, _, err = r.Read(context.Background(), map[string]int64{"": 2}, 4, 5*time.Second)
		require.NoError(t, err)
		require.Equal(t, span(2, 5), positions(recs))
		for _, h := range f.conns()[1:] {
			require.Equal(t, "5", h, "a reconnect only once all 5 were read")
		}
	})
}
