package source

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"time"
)

// An sseEvent is one dispatched event of a text/event-stream.
type sseEvent struct {
	id    string // the id: of its block; "" when hasID is false
	hasID bool   // the block had an id: line (one without NUL)
	typ   string // "message" when the block had no event:
	data  []byte
	// size is the length of the event's data when it was cut (past the
	// parser's maxEvent, or a data: line past maxLine): data holds only
	// its first bytes. 0 when whole.
	size int
}

// sseMaxLine is the default bound of one line of a stream, in bytes: an
// event's data is one JSON record, and a line past this is refused rather
// than buffered without end.
const sseMaxLine = 4 << 20

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
	maxEvent int
	line     []byte
	// lineSize is the length of the last line read when it was cut at
	// maxLine (0 when whole).
	lineSize int
	first    bool
	skipLF   bool
	retry    time.Duration // the last valid retry:, when hasRetry
	hasRetry bool
}

func newSSEParser(r io.Reader, maxLine, maxEvent int) *sseParser {
	return &sseParser{r: bufio.NewReaderSize(r, 64<<10), maxLine: maxLine, maxEvent: maxEvent, first: true}
}

// readLine returns the next line without its end, cut at maxLine bytes
// (lineSize then says how long it was). The slice is valid until the next
// call.
func (p *sseParser) readLine() ([]byte, error) {
	p.line = p.line[:0]
	p.lineSize = 0
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
				// Past the bound the line is counted, not held.
				if p.lineSize == 0 {
					p.lineSize = len(p.line)
				}
				p.lineSize++
				continue
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
	hasData, size := false, 0
	for {
		line, err := p.readLine()
		if err != nil {
			return sseEvent{}, err
		}
		if len(line) == 0 {
			if !hasData {
				ev, size = sseEvent{}, 0
				continue
			}
			if ev.typ == "" {
				ev.typ = "message"
			}
			if data == nil {
				data = []byte{}
			}
			ev.data = data
			if size > len(data) {
				ev.size = size
			}
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
		if p.lineSize > 0 && string(field) != "data" {
			return sseEvent{}, errSSELineTooLong
		}
		switch string(field) {
		case "event":
			ev.typ = string(value)
		case "data":
			// Past maxEvent the data is counted, not held.
			full := len(value)
			if p.lineSize > 0 {
				full += p.lineSize - len(line)
			}
			if hasData {
				size++
				if len(data) < p.maxEvent {
					data = append(data, '\n')
				}
			}
			size += full
			data = append(data, value[:min(len(value), max(p.maxEvent-len(data), 0))]...)
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
