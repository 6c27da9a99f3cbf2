package source

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"mime"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/idem-dev/idem/internal/report"
)

// An sseSession is one goroutine reading the feed, across reconnects, into
// events; it ends on a refusal or error (err), a 204 (stopped) or stop.
type sseSession struct {
	r      *SSEReader
	cancel context.CancelFunc
	events chan Record
	done   chan struct{}
	// err and stopped are written before done and events are closed.
	err     error
	stopped bool

	lastRead int64         // the id of the last event read, -1 none
	retry    time.Duration // the server's retry:, when hasRetry
	hasRetry bool

	mu        sync.Mutex
	failing   time.Time // when the failures in a row began; zero when connected
	lastErr   error
	connected bool // it has connected once
}

func (r *SSEReader) startSession(after int64) *sseSession {
	ctx, cancel := context.WithCancel(context.Background())
	s := &sseSession{
		r:        r,
		cancel:   cancel,
		events:   make(chan Record, r.opts.Buffer),
		done:     make(chan struct{}),
		lastRead: after,
	}
	go s.run(ctx)
	return s
}

func (s *sseSession) stop() {
	s.cancel()
	<-s.done
}

// failingSince returns the last connection error when every connection
// attempt since t failed, or since the session began when it has never
// connected.
func (s *sseSession) failingSince(t time.Time) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failing.IsZero() || (s.failing.After(t) && s.connected) {
		return nil
	}
	return s.lastErr
}

func (s *sseSession) noteFailure(err error) {
	s.mu.Lock()
	if s.failing.IsZero() {
		s.failing = time.Now()
	}
	s.lastErr = err
	s.mu.Unlock()
}

func (s *sseSession) noteConnected() {
	s.mu.Lock()
	s.failing, s.lastErr, s.connected = time.Time{}, nil, true
	s.mu.Unlock()
}

// errSSEStop is a 204: the server says stop.
var errSSEStop = errors.New("server said stop (204)")

// sseFatal marks an error after which the session does not reconnect.
type sseFatal struct{ err error }

func (e *sseFatal) Error() string { return e.err.Error() }
func (e *sseFatal) Unwrap() error { return e.err }

func (s *sseSession) run(ctx context.Context) {
	// done closes before events: a Read that sees events closed must find
	// Stopped true, and Stopped looks at done first.
	defer close(s.events)
	defer close(s.done)
	failures := 0
	for {
		gotNew, err := s.connect(ctx)
		if ctx.Err() != nil {
			return
		}
		if errors.Is(err, errSSEStop) {
			s.stopped = true
			return
		}
		var fatal *sseFatal
		if errors.As(err, &fatal) {
			s.err = fatal.err
			return
		}
		if gotNew {
			failures = 0
		}
		if err == nil {
			err = io.ErrUnexpectedEOF
		}
		s.noteFailure(err)
		t := time.NewTimer(backoff(s.r.opts.MinBackoff, s.r.opts.MaxBackoff, s.retry, s.hasRetry, failures))
		failures++
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// backoff is the delay before the reconnect after failures failures in a
// row: the server's retry (or min) doubled per failure, at most max (or
// retry when larger). A retry: 0 reconnects at once the first time, then
// backs off from min.
func backoff(min, max, retry time.Duration, hasRetry bool, failures int) time.Duration {
	d := min
	if hasRetry {
		d = retry
		if d == 0 {
			if failures == 0 {
				return 0
			}
			d, failures = min, failures-1
		}
	}
	limit := max
	if d > limit {
		limit = d
	}
	for i := 0; i < failures && d < limit; i++ {
		d *= 2
	}
	if d > limit {
		d = limit
	}
	return d
}

// connect makes one request and reads its events until the connection
// ends. gotNew reports whether it gave an event past the last one read.
func (s *sseSession) connect(ctx context.Context) (gotNew bool, err error) {
	url := s.r.url
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	req, err := s.newRequest(ctx)
	if err != nil {
		return false, &sseFatal{fmt.Errorf("sse %s: %w", url, err)}
	}
	var idle *time.Timer
	if d := s.r.opts.IdleTimeout; d > 0 {
		idle = time.AfterFunc(d, func() { cancel(fmt.Errorf("nothing received for %s (IdleTimeout)", d)) })
		defer idle.Stop()
	}
	resp, err := s.r.opts.Client.Do(req)
	if err != nil {
		if cause := context.Cause(ctx); cause != nil && cause != context.Canceled {
			err = cause
		}
		return false, fmt.Errorf("sse %s: %w", url, err)
	}
	defer resp.Body.Close()
	if err := checkSSEResponse(url, resp); err != nil {
		return false, err
	}
	s.noteConnected()

	var body io.Reader = resp.Body
	if idle != nil {
		body = &idleReader{r: resp.Body, idle: idle, d: s.r.opts.IdleTimeout}
	}
	return s.readEvents(ctx, body, idle)
}

// newRequest is the GET of the feed, resuming after the last event read.
func (s *sseSession) newRequest(ctx context.Context) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.r.url, nil)
	if err != nil {
		return nil, err
	}
	for k, vs := range s.r.opts.Header {
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Cache-Control", "no-cache")
	if s.lastRead >= 0 {
		req.Header.Set("Last-Event-ID", strconv.FormatInt(s.lastRead, 10))
	}
	return req, nil
}

// checkSSEResponse returns errSSEStop for a 204, a retryable error for a
// 5xx, an *sseFatal for any other status but 200 or a body that is not
// text/event-stream, and nil for a feed to read.
func checkSSEResponse(url string, resp *http.Response) error {
	switch {
	case resp.StatusCode == http.StatusNoContent:
		return errSSEStop
	case resp.StatusCode >= 500:
		io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
		return fmt.Errorf("sse %s: %s", url, resp.Status)
	case resp.StatusCode != http.StatusOK:
		return &sseFatal{fmt.Errorf("sse %s: %s: the server refused the request; check [input] url and the server", url, resp.Status)}
	}
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt != "text/event-stream" {
		return &sseFatal{fmt.Errorf("sse %s: content type %q, want text/event-stream: is [input] url an SSE feed?", url, resp.Header.Get("Content-Type"))}
	}
	return nil
}

// readEvents parses body and sends the new events to s.events (those of a
// type not wanted as Skipped records) until
// the body ends, fails or a refusal. ctx is the connection's: its cause
// says why the body was cut (IdleTimeout). idle, when not nil, is stopped
// while an event waits for Read.
func (s *sseSession) readEvents(ctx context.Context, body io.Reader, idle *time.Timer) (gotNew bool, err error) {
	url := s.r.url
	p := newSSEParser(body, s.r.opts.MaxLine, s.r.opts.MaxEvent)
	prev := int64(-1) // the last id on this connection
	for {
		ev, err := p.next()
		if p.hasRetry {
			s.retry, s.hasRetry = p.retry, true
		}
		if err != nil {
			if errors.Is(err, errSSELineTooLong) {
				return gotNew, &sseFatal{report.Refuse("stream", "sse %s: a line of more than %d bytes after id %d: idem reads one JSON object per event; check the feed", url, s.r.opts.MaxLine, s.lastRead)}
			}
			if err == io.EOF {
				err = nil
			} else if cause := context.Cause(ctx); cause != nil && cause != context.Canceled {
				err = cause
			}
			if err != nil {
				err = fmt.Errorf("sse %s: %w", url, err)
			}
			return gotNew, err
		}
		if !ev.hasID && !s.wanted(ev.typ) {
			// An event of a type [input] events does not select, without
			// an id (a heartbeat "event: ping"), is no record and has no
			// position: it is passed over, as a comment is.
			continue
		}
		id, ferr := s.check(ev, prev)
		if ferr != nil {
			return gotNew, &sseFatal{ferr}
		}
		prev = id
		if id <= s.lastRead {
			continue // resent after a reconnect
		}
		// An event of a type not selected is passed on without its data,
		// as a skipped record: it still gets an outcome, and the position
		// moves past it.
		rec := Record{Position: id, Skipped: true}
		if s.wanted(ev.typ) {
			rec = Record{Position: id, Value: ev.data, Oversize: ev.size}
		}
		// Waiting for Read to take the event is not idleness.
		if idle != nil {
			idle.Stop()
		}
		select {
		case s.events <- rec:
		case <-ctx.Done():
			return gotNew, ctx.Err()
		}
		if idle != nil {
			idle.Reset(s.r.opts.IdleTimeout)
		}
		s.lastRead, gotNew = id, true
	}
}

// idleReader restarts the idle timer on every read that gives bytes.
type idleReader struct {
	r    io.Reader
	idle *time.Timer
	d    time.Duration
}

func (ir *idleReader) Read(b []byte) (int, error) {
	n, err := ir.r.Read(b)
	if n > 0 {
		ir.idle.Reset(ir.d)
	}
	return n, err
}

// check returns ev's position, or the refusal of an event idem cannot
// record exactly once.
func (s *sseSession) check(ev sseEvent, prev int64) (int64, error) {
	url := s.r.url
	const fix = "idem uses the event id as the stream position: the server must send an id: line with every event, a base-10 integer that increases along the feed"
	if !ev.hasID {
		return 0, report.Refuse("stream", "sse %s: an event without an id (after id %d, data %s): %s", url, s.lastRead, clip(ev.data), fix)
	}
	id, err := parseEventID(ev.id)
	if errors.Is(err, strconv.ErrRange) || err == nil && id == math.MaxInt64 {
		// The next position is id+1: it must fit in an int64, or the
		// position would wrap and every run read the same events again.
		return 0, report.Refuse("stream", "sse %s: event id %s is beyond the ids idem can record (at most %d, so that the next position, id+1, fits in a signed 64-bit integer): %s", url, ev.id, int64(math.MaxInt64-1), fix)
	}
	if err != nil {
		return 0, report.Refuse("stream", "sse %s: event id %q is not a base-10 integer: %s", url, ev.id, fix)
	}
	if prev >= 0 && id <= prev {
		return 0, report.Refuse("stream", "sse %s: event id %d after id %d on one connection does not increase: %s", url, id, prev, fix)
	}
	return id, nil
}

func (s *sseSession) wanted(typ string) bool {
	if len(s.r.opts.Events) == 0 {
		return true
	}
	for _, t := range s.r.opts.Events {
		if t == typ {
			return true
		}
	}
	return false
}

// parseEventID parses an id of ASCII digits only (no sign, no space).
func parseEventID(s string) (int64, error) {
	if s == "" {
		return 0, strconv.ErrSyntax
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, strconv.ErrSyntax
		}
	}
	return strconv.ParseInt(s, 10, 64)
}

// clip quotes data for a message, cut at 80 bytes.
func clip(data []byte) string {
	if len(data) > 80 {
		return strconv.Quote(string(data[:80])) + "..."
	}
	return strconv.Quote(string(data))
}
