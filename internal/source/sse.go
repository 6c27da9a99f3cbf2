package source

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/idem-dev/idem/internal/job"
)

// ErrSSEUnreachable is returned by SSEReader.Read when no record came and
// no connection was made during the whole Read (or since its connection
// dropped before the Read began): every attempt failed with a network error
// or a 5xx. The reader keeps retrying; a later Read may succeed.
var ErrSSEUnreachable = errors.New("sse server unreachable")

// SSEOptions tune an SSEReader. The zero value is usable.
type SSEOptions struct {
	// Client makes the requests. Nil uses a client of its own, with no
	// overall timeout (a stream never ends), whose idle connections Close
	// releases.
	Client *http.Client
	// Header is added to every request (an Authorization header, say).
	Header http.Header
	// Events, when not empty, names the event types that are records (the
	// type of an event without an event: line is "message"). Events of
	// other types are read and dropped. Empty takes every event.
	Events []string
	// MinBackoff is the first delay before reconnecting after a failure,
	// when the server has sent no retry: (default 200ms). Each failure in
	// a row doubles it, up to MaxBackoff (default 30s); a connection that
	// gives a new event resets it. A retry: from the server replaces
	// MinBackoff, and MaxBackoff when larger.
	MinBackoff time.Duration
	MaxBackoff time.Duration
	// Buffer is how many events are read ahead of Read (default 1024); the
	// connection is not read further until Read takes them.
	Buffer int
	// MaxLine bounds one line of the stream in bytes (default 4 MiB).
	MaxLine int
	// IdleTimeout, when set, drops and reconnects a connection that gives
	// no byte (not even a comment) for this long: a connection that died
	// without a FIN would otherwise stay silent for ever. Set it above the
	// server's heartbeat interval. Zero never drops an idle connection.
	IdleTimeout time.Duration
}

// SSEReader is the StreamReader of a server-sent events feed ([input] kind
// = "sse"): one partition, named "", whose positions are the event ids,
// which must be base-10 integers (0 or more) increasing along the feed.
//
// The first Read connects with Last-Event-ID set to next[""]-1 (no header
// when next has no "" or it is 0 or less: the server picks where to start,
// usually the live end). The connection stays open between Reads, read
// ahead by a goroutine; a dropped connection, EOF, 5xx or network error is
// retried with backoff, with Last-Event-ID the last event read. Events at
// or below the last one read (a server resending after a reconnect) and
// below next are dropped, so Read never returns a record below next. A Read
// whose next is not one past the last record it returned (the caller did
// not commit them) reconnects from next.
//
// An event with data but no id: line, an id that is not a base-10 integer,
// an id that does not increase on one connection, and data that is not one
// JSON object are refused (*job.RefusedError, guard "stream"): the position
// or the record would be lost. Any other 4xx, or a response that is not
// text/event-stream, is an error. A Read that meets a refusal or error
// returns no records, not even those before it, and the reader keeps
// returning it (until a Read from an earlier next reconnects). HTTP 204
// means the server says stop: Read returns what was read, then nothing at
// once, and Stopped reports true.
//
// Read and Close may be called from different goroutines; Reads must not
// overlap.
type SSEReader struct {
	url  string
	opts SSEOptions
	own  *http.Transport // the transport of a client of our own, or nil

	mu   sync.Mutex
	sess *sseSession
	// cursor is the next position sess gives: one past the last record
	// Read returned, or the next the session was started at. hasCursor is
	// false for a session started without one that has returned nothing.
	cursor    int64
	hasCursor bool
	closed    bool
}

var _ StreamReader = (*SSEReader)(nil)

// NewSSEReader returns a reader of the feed at url. It connects on the
// first Read.
func NewSSEReader(url string, opts SSEOptions) *SSEReader {
	if opts.MinBackoff <= 0 {
		opts.MinBackoff = 200 * time.Millisecond
	}
	if opts.MaxBackoff <= 0 {
		opts.MaxBackoff = 30 * time.Second
	}
	if opts.MaxBackoff < opts.MinBackoff {
		opts.MaxBackoff = opts.MinBackoff
	}
	if opts.Buffer <= 0 {
		opts.Buffer = 1024
	}
	if opts.MaxLine <= 0 {
		opts.MaxLine = 4 << 20
	}
	r := &SSEReader{url: url, opts: opts}
	if opts.Client == nil {
		r.own = http.DefaultTransport.(*http.Transport).Clone()
		r.opts.Client = &http.Client{Transport: r.own}
	}
	return r
}

// Read returns at most max events at or past next[""], as records of
// partition "". It returns once max are read, when maxWait has passed since
// it began, when the server said stop (204), or when ctx ends (with the
// records read so far, or ctx's error when there are none). Gaps are never
// reported: an SSE server cannot say which ids it no longer holds.
func (r *SSEReader) Read(ctx context.Context, next map[string]int64, max int, maxWait time.Duration) ([]Record, []Gap, error) {
	began := time.Now()
	from, hasFrom := next[""]
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil, nil, fmt.Errorf("sse %s: read after close", r.url)
	}
	if r.sess == nil || hasFrom != r.hasCursor || (hasFrom && from != r.cursor) {
		if r.sess != nil {
			r.sess.stop()
		}
		after := int64(-1)
		if hasFrom && from > 0 {
			after = from - 1
		}
		r.sess = r.startSession(after)
		r.cursor, r.hasCursor = from, hasFrom
	}
	s := r.sess
	r.mu.Unlock()
	if max <= 0 {
		return nil, nil, nil
	}

	timer := time.NewTimer(maxWait)
	defer timer.Stop()
	var out []Record
	for len(out) < max {
		select {
		case rec, ok := <-s.events:
			if !ok {
				if s.err != nil {
					return nil, nil, s.err
				}
				return r.deliver(out), nil, nil
			}
			if hasFrom && rec.Position < from {
				continue
			}
			out = append(out, rec)
		case <-timer.C:
			if len(out) == 0 {
				if err := s.failingSince(began); err != nil {
					return nil, nil, fmt.Errorf("sse %s: %w: %w (still retrying)", r.url, ErrSSEUnreachable, err)
				}
			}
			return r.deliver(out), nil, nil
		case <-ctx.Done():
			if len(out) == 0 {
				return nil, nil, ctx.Err()
			}
			return r.deliver(out), nil, nil
		}
	}
	return r.deliver(out), nil, nil
}

func (r *SSEReader) deliver(out []Record) []Record {
	if len(out) > 0 {
		r.mu.Lock()
		r.cursor, r.hasCursor = out[len(out)-1].Position+1, true
		r.mu.Unlock()
	}
	return out
}

// Stopped reports whether the server said stop (HTTP 204) and every event
// read before has been returned: a follow loop ends there.
func (r *SSEReader) Stopped() bool {
	r.mu.Lock()
	s := r.sess
	r.mu.Unlock()
	if s == nil {
		return false
	}
	select {
	case <-s.done:
	default:
		return false
	}
	return s.stopped && len(s.events) == 0
}

// Close closes the connection and waits for the goroutine that reads it.
func (r *SSEReader) Close() error {
	r.mu.Lock()
	s := r.sess
	r.sess, r.closed = nil, true
	r.mu.Unlock()
	if s != nil {
		s.stop()
	}
	if r.own != nil {
		r.own.CloseIdleConnections()
	}
	return nil
}

// An sseSession is one goroutine reading the feed, across reconnects, into
// events; it ends on a refusal or error (err), a 204 (stopped) or stop.
type sseSession struct {
	r      *SSEReader
	cancel context.CancelFunc
	events chan Record
	done   chan struct{}
	// err and stopped are written before events is closed.
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
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return false, &sseFatal{fmt.Errorf("sse %s: %w", url, err)}
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
	switch {
	case resp.StatusCode == http.StatusNoContent:
		return false, errSSEStop
	case resp.StatusCode >= 500:
		io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
		return false, fmt.Errorf("sse %s: %s", url, resp.Status)
	case resp.StatusCode != http.StatusOK:
		return false, &sseFatal{fmt.Errorf("sse %s: %s: the server refused the request; check [input] url and the server", url, resp.Status)}
	}
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt != "text/event-stream" {
		return false, &sseFatal{fmt.Errorf("sse %s: content type %q, want text/event-stream: is [input] url an SSE feed?", url, resp.Header.Get("Content-Type"))}
	}
	s.noteConnected()

	var body io.Reader = resp.Body
	if idle != nil {
		body = &idleReader{r: resp.Body, idle: idle, d: s.r.opts.IdleTimeout}
	}
	p := newSSEParser(body, s.r.opts.MaxLine)
	prev := int64(-1) // the last id on this connection
	for {
		ev, err := p.next()
		if p.hasRetry {
			s.retry, s.hasRetry = p.retry, true
		}
		if err != nil {
			if errors.Is(err, errSSELineTooLong) {
				return gotNew, &sseFatal{job.Refuse("stream", "sse %s: a line of more than %d bytes after id %d: idem reads one JSON object per event; check the feed", url, s.r.opts.MaxLine, s.lastRead)}
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
		id, ferr := s.check(ev, prev)
		if ferr != nil {
			return gotNew, &sseFatal{ferr}
		}
		prev = id
		if id <= s.lastRead {
			continue // resent after a reconnect
		}
		if s.wanted(ev.typ) {
			// Waiting for Read to take the event is not idleness.
			if idle != nil {
				idle.Stop()
			}
			select {
			case s.events <- Record{Position: id, Value: ev.data}:
			case <-ctx.Done():
				return gotNew, ctx.Err()
			}
			if idle != nil {
				idle.Reset(s.r.opts.IdleTimeout)
			}
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
		return 0, job.Refuse("stream", "sse %s: an event without an id (after id %d, data %s): %s", url, s.lastRead, clip(ev.data), fix)
	}
	id, err := parseEventID(ev.id)
	if err != nil {
		return 0, job.Refuse("stream", "sse %s: event id %q is not a base-10 integer: %s", url, ev.id, fix)
	}
	if prev >= 0 && id <= prev {
		return 0, job.Refuse("stream", "sse %s: event id %d after id %d on one connection does not increase: %s", url, id, prev, fix)
	}
	if id > s.lastRead && s.wanted(ev.typ) {
		if v := bytes.TrimSpace(ev.data); len(v) == 0 || v[0] != '{' || !json.Valid(v) {
			return 0, job.Refuse("stream", "sse %s: event id %d: data %s is not one JSON object: each event's data must be one JSON object (the record)", url, id, clip(ev.data))
		}
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

// An sseEvent is one dispatched event of a text/event-stream.
type sseEvent struct {
	id    string // the id: of its block; "" when hasID is false
	hasID bool   // the block had an id: line (one without NUL)
	typ   string // "message" when the block had no event:
	data  []byte
}

var errSSELineTooLong = errors.New("line too long")

var utf8BOM = []byte{0xEF, 0xBB, 0xBF}

// sseParser reads events from a text/event-stream body as the WHATWG HTML
// standard (9.2.6) says: lines end in CRLF, LF or CR; a line starting with
// a colon is a comment; a field's value follows its first colon without
// the one space after it, and a line with no colon is a field with an
// empty value; data: lines join with LF; an id containing NUL is ignored;
// retry: of ASCII digits only sets the reconnection time; a blank line
// dispatches the event unless its data is empty; an event not ended by a
// blank line at EOF is dropped. A UTF-8 BOM before the first line is
// skipped.
type sseParser struct {
	r        *bufio.Reader
	maxLine  int
	line     []byte
	first    bool
	skipLF   bool
	retry    time.Duration // the last valid retry:, when hasRetry
	hasRetry bool
}

func newSSEParser(r io.Reader, maxLine int) *sseParser {
	return &sseParser{r: bufio.NewReaderSize(r, 64<<10), maxLine: maxLine, first: true}
}

// readLine returns the next line without its end. The slice is valid until
// the next call.
func (p *sseParser) readLine() ([]byte, error) {
	p.line = p.line[:0]
	for {
		b, err := p.r.ReadByte()
		if err != nil {
			return nil, err
		}
		if p.skipLF {
			p.skipLF = false
			if b == '\n' {
				continue
			}
		}
		switch b {
		case '\n':
		case '\r':
			p.skipLF = true
		default:
			if len(p.line) >= p.maxLine {
				return nil, errSSELineTooLong
			}
			p.line = append(p.line, b)
			continue
		}
		if p.first {
			p.first = false
			return bytes.TrimPrefix(p.line, utf8BOM), nil
		}
		return p.line, nil
	}
}

// next returns the next dispatched event, or io.EOF at the end of the body.
func (p *sseParser) next() (sseEvent, error) {
	var ev sseEvent
	var data []byte
	hasData := false
	for {
		line, err := p.readLine()
		if err != nil {
			return sseEvent{}, err
		}
		if len(line) == 0 {
			if !hasData {
				ev = sseEvent{}
				continue
			}
			if ev.typ == "" {
				ev.typ = "message"
			}
			if data == nil {
				data = []byte{}
			}
			ev.data = data
			return ev, nil
		}
		if line[0] == ':' {
			continue
		}
		field, value := line, []byte(nil)
		if i := bytes.IndexByte(line, ':'); i >= 0 {
			field, value = line[:i], line[i+1:]
			if len(value) > 0 && value[0] == ' ' {
				value = value[1:]
			}
		}
		switch string(field) {
		case "event":
			ev.typ = string(value)
		case "data":
			if hasData {
				data = append(data, '\n')
			}
			data = append(data, value...)
			hasData = true
		case "id":
			if bytes.IndexByte(value, 0) < 0 {
				ev.id, ev.hasID = string(value), true
			}
		case "retry":
			if ms, ok := digits(value); ok {
				p.retry, p.hasRetry = time.Duration(ms)*time.Millisecond, true
			}
		}
	}
}

// digits parses a non-empty run of ASCII digits.
func digits(b []byte) (int64, bool) {
	if len(b) == 0 {
		return 0, false
	}
	var n int64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		if n > (1<<62)/10 {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	return n, true
}
