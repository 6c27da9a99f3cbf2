package source

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"os"
	"unicode/utf8"
)

// jsonFieldsKnown reports whether every line of the JSON Lines file at path
// is one JSON object in the plain form this scanner proves valid, every
// top-level field of which is in known. It is the stager's fast path: when
// it holds, DuckDB's scan for unexpected fields (read_ndjson_objects and
// json_keys over the whole file, the stage's costliest part at 1M rows)
// would find none, and is skipped. false proves nothing: the caller then
// asks DuckDB, which names the unexpected field or the malformed line as
// before. So the scanner accepts a subset of what DuckDB reads, never more:
//
//   - lines end with \n (the last may not); a line is exactly one object,
//     no white space around it, at most 1 MiB; no blank line;
//   - white space between tokens is space or tab;
//   - a top-level field appears once (DuckDB's reader refuses a line
//     with a field twice);
//   - strings are valid UTF-8 without control characters; escapes are
//     JSON's, \u never a surrogate; a top-level field name has no escape
//     (DuckDB would compare its decoded text);
//   - numbers have at most 18 integer and 18 fraction digits and no
//     exponent; values nest at most 32 deep.
//
// An unreadable file is "not proven" too: DuckDB's read then reports it.
func jsonFieldsKnown(path string, known map[string]bool) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	r := bufio.NewReaderSize(f, 1<<20)
	for {
		line, err := r.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			return false
		}
		if err != nil && err != io.EOF {
			return false
		}
		if n := len(line); n > 0 && line[n-1] == '\n' {
			line = line[:n-1]
		} else if err == io.EOF && n == 0 {
			return true // the end, after a \n or of an empty file
		}
		if !knownObjectLine(line, known) {
			return false
		}
		if err == io.EOF {
			return true
		}
	}
}

// knownObjectLine reports whether line is one plain JSON object whose
// top-level field names are all in known (see jsonFieldsKnown).
func knownObjectLine(line []byte, known map[string]bool) bool {
	s := jsonScan{b: line}
	return s.object(0, known) && s.i == len(line)
}

// jsonScan validates the plain JSON of one line from b[i].
type jsonScan struct {
	b []byte
	i int
}

const maxJSONDepth = 32

func (s *jsonScan) ws() {
	for s.i < len(s.b) && (s.b[s.i] == ' ' || s.b[s.i] == '\t') {
		s.i++
	}
}

func (s *jsonScan) peek() byte {
	if s.i < len(s.b) {
		return s.b[s.i]
	}
	return 0
}

// object reads an object at b[i]; at depth 0 each field name must be in
// known.
func (s *jsonScan) object(depth int, known map[string]bool) bool {
	if s.peek() != '{' || depth > maxJSONDepth {
		return false
	}
	s.i++
	s.ws()
	if s.peek() == '}' {
		s.i++
		return true
	}
	var names [8][2]int // the top-level field names so far, as spans of b
	seen := names[:0]
	for {
		start := s.i + 1
		plain, ok := s.str()
		if !ok {
			return false
		}
		if depth == 0 {
			name := s.b[start : s.i-1]
			if !plain || !known[string(name)] {
				return false
			}
			for _, sp := range seen {
				if bytes.Equal(s.b[sp[0]:sp[1]], name) {
					return false
				}
			}
			seen = append(seen, [2]int{start, s.i - 1})
		}
		s.ws()
		if s.peek() != ':' {
			return false
		}
		s.i++
		s.ws()
		if !s.value(depth + 1) {
			return false
		}
		s.ws()
		switch s.peek() {
		case ',':
			s.i++
			s.ws()
		case '}':
			s.i++
			return true
		default:
			return false
		}
	}
}

func (s *jsonScan) array(depth int) bool {
	if depth > maxJSONDepth {
		return false
	}
	s.i++ // [
	s.ws()
	if s.peek() == ']' {
		s.i++
		return true
	}
	for {
		if !s.value(depth + 1) {
			return false
		}
		s.ws()
		switch s.peek() {
		case ',':
			s.i++
			s.ws()
		case ']':
			s.i++
			return true
		default:
			return false
		}
	}
}

func (s *jsonScan) value(depth int) bool {
	switch c := s.peek(); {
	case c == '"':
		_, ok := s.str()
		return ok
	case c == '{':
		return s.object(depth, nil)
	case c == '[':
		return s.array(depth)
	case c == 't':
		return s.literal("true")
	case c == 'f':
		return s.literal("false")
	case c == 'n':
		return s.literal("null")
	case c == '-' || (c >= '0' && c <= '9'):
		return s.number()
	}
	return false
}

func (s *jsonScan) literal(word string) bool {
	if len(s.b)-s.i < len(word) || string(s.b[s.i:s.i+len(word)]) != word {
		return false
	}
	s.i += len(word)
	return true
}

// number reads -?(0|[1-9][0-9]*)(\.[0-9]+)? with at most 18 digits in
// each part.
func (s *jsonScan) number() bool {
	if s.peek() == '-' {
		s.i++
	}
	n := s.digits()
	if n == 0 || n > 18 || (n > 1 && s.b[s.i-n] == '0') {
		return false
	}
	if s.peek() == '.' {
		s.i++
		if n := s.digits(); n == 0 || n > 18 {
			return false
		}
	}
	c := s.peek()
	return c != 'e' && c != 'E'
}

func (s *jsonScan) digits() int {
	start := s.i
	for s.i < len(s.b) && s.b[s.i] >= '0' && s.b[s.i] <= '9' {
		s.i++
	}
	return s.i - start
}

// plainStringByte is true for the bytes a string holds as they are:
// ASCII, neither a control character, a quote nor a backslash.
var plainStringByte = func() (t [256]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// str reads a string at b[i] (the opening quote); plain is true when it
// holds no escape.
func (s *jsonScan) str() (plain, ok bool) {
	if s.peek() != '"' {
		return false, false
	}
	s.i++
	plain = true
	for s.i < len(s.b) {
		for s.i < len(s.b) && plainStringByte[s.b[s.i]] {
			s.i++
		}
		if s.i == len(s.b) {
			break
		}
		c := s.b[s.i]
		switch {
		case c == '"':
			s.i++
			return plain, true
		case c < 0x20:
			return false, false
		case c == '\\':
			plain = false
			if s.i+1 >= len(s.b) {
				return false, false
			}
			switch s.b[s.i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				s.i += 2
			case 'u':
				if len(s.b)-s.i < 6 {
					return false, false
				}
				var r rune
				for _, h := range s.b[s.i+2 : s.i+6] {
					switch {
					case h >= '0' && h <= '9':
						r = r<<4 | rune(h-'0')
					case h >= 'a' && h <= 'f':
						r = r<<4 | rune(h-'a'+10)
					case h >= 'A' && h <= 'F':
						r = r<<4 | rune(h-'A'+10)
					default:
						return false, false
					}
				}
				if r >= 0xD800 && r <= 0xDFFF {
					return false, false
				}
				s.i += 6
			default:
				return false, false
			}
		case c < utf8.RuneSelf:
			s.i++
		default:
			r, size := utf8.DecodeRune(s.b[s.i:])
			if r == utf8.RuneError && size <= 1 {
				return false, false
			}
			s.i += size
		}
	}
	return false, false
}
