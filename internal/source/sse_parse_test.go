package source

import (
	"io"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/stretchr/testify/require"
)

func TestSSEParse(t *testing.T) {
	t.Parallel()
	ev := func(id string, typ, data string) sseEvent {
		return sseEvent{id: id, hasID: true, typ: typ, data: []byte(data)}
	}
	cases := []struct {
		name  string
		wire  string
		want  []sseEvent
		retry string // the parser's retry after the body, "" none
	}{
		{"lf", "id: 1\ndata: {\"a\":1}\n\n", []sseEvent{ev("1", "message", `{"a":1}`)}, ""},
		{"crlf", "id: 1\r\ndata: x\r\n\r\n", []sseEvent{ev("1", "message", "x")}, ""},
		{"cr", "id: 1\rdata: x\r\r", []sseEvent{ev("1", "message", "x")}, ""},
		{"mixed line ends", "id: 1\r\ndata: a\rdata: b\n\r\nid: 2\rdata: c\r\n\n", []sseEvent{ev("1", "message", "a\nb"), ev("2", "message", "c")}, ""},
		{"data lines join with lf", "id: 1\ndata: a\ndata: b\ndata:\n\n", []sseEvent{ev("1", "message", "a\nb\n")}, ""},
		{"one space after the colon", "id: 1\ndata:  x\n\nid:2\ndata:y\n\n", []sseEvent{ev("1", "message", " x"), ev("2", "message", "y")}, ""},
		{"colon in the value", "id: 1\ndata: a: b\n\n", []sseEvent{ev("1", "message", "a: b")}, ""},
		{"comments", ": hello\nid: 2\n:\n: x\ndata: y\n\n", []sseEvent{ev("2", "message", "y")}, ""},
		{"field with no colon", "id: 1\ndata\n\n", []sseEvent{ev("1", "message", "")}, ""},
		{"id with no colon is empty", "id\ndata: x\n\n", []sseEvent{ev("", "message", "x")}, ""},
		{"event type", "event: price\nid: 3\ndata: z\n\nid: 4\ndata: w\n\n", []sseEvent{ev("3", "price", "z"), ev("4", "message", "w")}, ""},
		{"unknown fields ignored", "foo: bar\nData: x\ndata : y\nid: 1\ndata: z\n\n", []sseEvent{ev("1", "message", "z")}, ""},
		{"block without data not dispatched", "id: 1\n\nevent: x\n\nid: 2\ndata: x\n\n", []sseEvent{ev("2", "message", "x")}, ""},
		{"no id", "data: x\n\n", []sseEvent{{typ: "message", data: []byte("x")}}, ""},
		{"id with NUL ignored", "id: 5\nid: 6\x007\ndata: x\n\n", []sseEvent{ev("5", "message", "x")}, ""},
		{"only id has NUL", "id: 6\x00\ndata: x\n\n", []sseEvent{{typ: "message", data: []byte("x")}}, ""},
		{"BOM", "\xEF\xBB\xBFid: 1\ndata: x\n\n", []sseEvent{ev("1", "message", "x")}, ""},
		{"only one BOM skipped", "\xEF\xBB\xBF\xEF\xBB\xBFid: 1\ndata: x\n\n", []sseEvent{{typ: "message", data: []byte("x")}}, ""},
		{"BOM after the first line is data", "id: 1\ndata: \xEF\xBB\xBFx\n\n", []sseEvent{ev("1", "message", "\xEF\xBB\xBFx")}, ""},
		{"unterminated event dropped at EOF", "id: 1\ndata: x\n\nid: 2\ndata: y\n", []sseEvent{ev("1", "message", "x")}, ""},
		{"id does not carry to the next event", "id: 1\nevent: x\n\ndata: y\n\n", []sseEvent{{typ: "message", data: []byte("y")}}, ""},
		{"event type does not carry to the next event", "event: a\nid: 1\ndata: x\n\nid: 2\ndata: y\n\n", []sseEvent{ev("1", "a", "x"), ev("2", "message", "y")}, ""},
		{"last field line wins", "id: 1\nid: 2\nevent: a\nevent: b\ndata: x\n\n", []sseEvent{ev("2", "b", "x")}, ""},
		{"empty data line", "id: 1\ndata:\n\n", []sseEvent{ev("1", "message", "")}, ""},
		{"blank lines between events", "\n\n\r\nid: 1\ndata: x\n\n\n\nid: 2\ndata: y\n\n", []sseEvent{ev("1", "message", "x"), ev("2", "message", "y")}, ""},
		{"comment inside data lines", "id: 1\ndata: a\n: keepalive\ndata: b\n\n", []sseEvent{ev("1", "message", "a\nb")}, ""},
		{"cr cr is a blank line", "id: 1\r\rdata: x\r\n\r\n", []sseEvent{{typ: "message", data: []byte("x")}}, ""},
		{"empty body", "", nil, ""},
		{"retry", "retry: 250\n\n", nil, "250ms"},
		{"retry zero", "retry: 0\n\n", nil, "0s"},
		{"retry not digits ignored", "retry: 250\nretry: 25x\nretry: -1\nretry:\nretry:  5\n\n", nil, "250ms"},
	}
	readers := map[string]func(string) io.Reader{
		"whole":    func(s string) io.Reader { return strings.NewReader(s) },
		"one byte": func(s string) io.Reader { return iotest.OneByteReader(strings.NewReader(s)) },
	}
	for _, c := range cases {
		for rn, mk := range readers {
			t.Run(c.name+"/"+rn, func(t *testing.T) {
				p := newSSEParser(mk(c.wire), 1<<10, 1<<11)
				var got []sseEvent
				for {
					ev, err := p.next()
					if err == io.EOF {
						break
					}
					require.NoError(t, err)
					got = append(got, ev)
				}
				require.Equal(t, c.want, got)
				retry := ""
				if p.hasRetry {
					retry = p.retry.String()
				}
				require.Equal(t, c.retry, retry)
			})
		}
	}
}

// TestSSEParseLineCap: a line of up to sseMaxLine bytes (its end not
// counted) is held; a data: line past it is cut there and its event says
// how long its data was (an oversize record, not an error), whatever the
// line end; a comment past it is passed over without being held; any
// other line past it is errSSELineTooLong. The cap is per
// line: two lines at the cap join.
func TestSSEParseLineCap(t *testing.T) {
	t.Parallel()
	data := func(n int) string { return "data: " + strings.Repeat("x", n-len("data: ")) }
	cases := []struct {
		name     string
		wire     string
		wantData int // the length of the one event's data held; -1 errSSELineTooLong; -2 io.EOF
		wantSize int // its length when cut, else 0
	}{
		{"at the cap lf", "id: 1\n" + data(sseMaxLine) + "\n\n", sseMaxLine - 6, 0},
		{"at the cap crlf", "id: 1\r\n" + data(sseMaxLine) + "\r\n\r\n", sseMaxLine - 6, 0},
		{"at the cap cr", "id: 1\r" + data(sseMaxLine) + "\r\r", sseMaxLine - 6, 0},
		{"one past the cap lf", "id: 1\n" + data(sseMaxLine+1) + "\n\n", sseMaxLine - 6, sseMaxLine - 5},
		{"one past the cap crlf", "id: 1\r\n" + data(sseMaxLine+1) + "\r\n\r\n", sseMaxLine - 6, sseMaxLine - 5},
		{"one past the cap unterminated", "id: 1\n" + data(sseMaxLine+1), -2, 0},
		{"a comment past the cap is passed over", ":" + strings.Repeat("x", sseMaxLine) + "\nid: 1\ndata: {}\n\n", 2, 0},
		{"an id past the cap", "id: " + strings.Repeat("1", sseMaxLine) + "\ndata: {}\n\n", -1, 0},
		{"two lines at the cap join past it", "id: 1\n" + data(sseMaxLine) + "\n" + data(sseMaxLine) + "\n\n", 2*(sseMaxLine-6) + 1, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			p := newSSEParser(strings.NewReader(c.wire), sseMaxLine, 2*sseMaxLine)
			ev, err := p.next()
			switch c.wantData {
			case -1:
				require.ErrorIs(t, err, errSSELineTooLong)
				return
			case -2:
				require.Equal(t, io.EOF, err)
				return
			}
			require.NoError(t, err)
			require.Len(t, ev.data, c.wantData)
			require.Equal(t, c.wantSize, ev.size)
			_, err = p.next()
			require.Equal(t, io.EOF, err)
		})
	}
}

// TestSSEParseEventCap: an event's data is held up to maxEvent bytes; past
// that it is cut, counted and the event dispatched with its size (an
// invalid_too_large record), without holding more (a feed of 1 GB in one
// event once drove idem to 4 GB); the next event is read as usual.
func TestSSEParseEventCap(t *testing.T) {
	t.Parallel()
	line := "data: " + strings.Repeat("x", 58) + "\n" // 64 bytes with its end
	p := newSSEParser(strings.NewReader("id: 1\n"+strings.Repeat(line, 2)+"\nid: 2\n"+strings.Repeat(line, 3)+"\nid: 3\ndata: {}\n\n"), 64, 128)
	ev, err := p.next()
	require.NoError(t, err)
	require.Len(t, ev.data, 2*58+1)
	require.Zero(t, ev.size)
	ev, err = p.next()
	require.NoError(t, err)
	require.Equal(t, "2", ev.id)
	require.Len(t, ev.data, 128)
	require.Equal(t, 3*58+2, ev.size)
	ev, err = p.next()
	require.NoError(t, err)
	require.Equal(t, "{}", string(ev.data))
}

// TestSSEParseLineTooLongAfterEvents: the events before a long line that
// is not data are returned; the error comes where the line is.
func TestSSEParseLineTooLongAfterEvents(t *testing.T) {
	t.Parallel()
	p := newSSEParser(strings.NewReader("id: 1\ndata: {}\n\nid: 2\nevent: "+strings.Repeat("x", 100)+"\n\n"), 64, 128)
	ev, err := p.next()
	require.NoError(t, err)
	require.Equal(t, "1", ev.id)
	_, err = p.next()
	require.ErrorIs(t, err, errSSELineTooLong)
}
