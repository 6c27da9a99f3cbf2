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
				p := newSSEParser(mk(c.wire), 1<<10)
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
// counted) is read; one byte more is errSSELineTooLong, whatever the line
// end, and the cap is per line, not per event.
func TestSSEParseLineCap(t *testing.T) {
	t.Parallel()
	data := func(n int) string { return "data: " + strings.Repeat("x", n-len("data: ")) }
	cases := []struct {
		name     string
		wire     string
		wantData int // the length of the one event's data; -1 errSSELineTooLong
	}{
		{"at the cap lf", "id: 1\n" + data(sseMaxLine) + "\n\n", sseMaxLine - 6},
		{"at the cap crlf", "id: 1\r\n" + data(sseMaxLine) + "\r\n\r\n", sseMaxLine - 6},
		{"at the cap cr", "id: 1\r" + data(sseMaxLine) + "\r\r", sseMaxLine - 6},
		{"one past the cap lf", "id: 1\n" + data(sseMaxLine+1) + "\n\n", -1},
		{"one past the cap crlf", "id: 1\r\n" + data(sseMaxLine+1) + "\r\n\r\n", -1},
		{"one past the cap unterminated", "id: 1\n" + data(sseMaxLine+1), -1},
		{"a comment past the cap", ":" + strings.Repeat("x", sseMaxLine) + "\nid: 1\ndata: {}\n\n", -1},
		{"two lines at the cap join past it", "id: 1\n" + data(sseMaxLine) + "\n" + data(sseMaxLine) + "\n\n", 2*(sseMaxLine-6) + 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			p := newSSEParser(strings.NewReader(c.wire), sseMaxLine)
			ev, err := p.next()
			if c.wantData < 0 {
				require.ErrorIs(t, err, errSSELineTooLong)
				return
			}
			require.NoError(t, err)
			require.Equal(t, "1", ev.id)
			require.Len(t, ev.data, c.wantData)
			_, err = p.next()
			require.Equal(t, io.EOF, err)
		})
	}
}

// TestSSEParseEventCap: an event's data lines may join up to twice the line
// bound; past that the event is errSSEEventTooLarge, read without holding
// more than the bound (a feed of 1 GB in one event once drove idem to 4 GB).
func TestSSEParseEventCap(t *testing.T) {
	t.Parallel()
	line := "data: " + strings.Repeat("x", 58) + "\n" // 64 bytes with its end
	p := newSSEParser(strings.NewReader("id: 1\n"+strings.Repeat(line, 2)+"\nid: 2\n"+strings.Repeat(line, 3)+"\n"), 64)
	ev, err := p.next()
	require.NoError(t, err)
	require.Len(t, ev.data, 2*58+1)
	_, err = p.next()
	require.ErrorIs(t, err, errSSEEventTooLarge)
}

// TestSSEParseLineTooLongAfterEvents: the events before the long line are
// returned; the error comes where the line is.
func TestSSEParseLineTooLongAfterEvents(t *testing.T) {
	t.Parallel()
	p := newSSEParser(strings.NewReader("id: 1\ndata: {}\n\nid: 2\ndata: "+strings.Repeat("x", 100)+"\n\n"), 64)
	ev, err := p.next()
	require.NoError(t, err)
	require.Equal(t, "1", ev.id)
	_, err = p.next()
	require.ErrorIs(t, err, errSSELineTooLong)
}
