package source

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"
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
	// type of an event without an event: line is "message"). An event of
	// another type is a skipped record (its position, no data) when it
	// has an id, and is passed over when it has none (a heartbeat). Empty
	// takes every event.
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
	// MaxLine bounds one line of the stream in bytes (default 4 MiB): a
	// data: line past it is cut there (its event is oversize); another
	// line past it is refused.
	MaxLine int
	// MaxEvent bounds one event's data in bytes (default 8 MiB): an event
	// past it is given as its first MaxEvent bytes with Record.Oversize
	// set, read without holding more.
	MaxEvent int
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
// An event with data but no id: line (but one of a type Events does not
// select, which is passed over), an id that is not a base-10 integer,
// an id that does not increase on one connection, and data that is not one
// JSON object are refused (*report.RefusedError, guard "stream"): the position
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
		opts.MaxLine = sseMaxLine
	}
	if opts.MaxEvent <= 0 {
		opts.MaxEvent = 2 * sseMaxLine
	}
	// One data: line may hold a whole event.
	opts.MaxLine = max(opts.MaxLine, opts.MaxEvent)
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
