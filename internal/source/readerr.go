package source

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"
)

// maxJSONObject is the largest JSONL line read, in bytes. DuckDB's JSON
// reader allocates twice this per read whatever the file's size, so 256 MB
// failed every JSONL run under memory_limit = 300MB.
const (
	maxJSONObject      = "16777216"
	maxJSONObjectBytes = 16777216
)

var (
	malformedJSON = regexp.MustCompile(`Malformed JSON in file "([^"]*)"`)
	jsonTooLong   = regexp.MustCompile(`\(>(\d+) bytes\)`)
	csvErrorLine  = regexp.MustCompile(`CSV Error on Line: (\d+)`)
	csvErrorFile  = regexp.MustCompile(`(?m)^\s*file = (.*)$`)
)

// ReadError rewrites a DuckDB reader error so that it names the user's
// file (not its retained copy) and, for malformed JSON, the true line: DuckDB
// 1.5's line numbers in that message are off by one.
func ReadError(err error, files []InputFile, format string) error {
	msg := err.Error()
	if i := strings.Index(msg, "\n\nLINE "); i >= 0 {
		msg = msg[:i]
	}
	if m := malformedJSON.FindStringSubmatch(msg); m != nil {
		path := originalPath(files, m[1])
		for _, f := range files {
			if f.Retained == m[1] {
				if line, reason := firstBadJSONLine(f.Retained); line > 0 {
					return fmt.Errorf("input %s: line %d: malformed JSON: %s", path, line, reason)
				}
			}
		}
		for _, f := range files {
			msg = strings.ReplaceAll(msg, f.Retained, f.Path)
		}
		return fmt.Errorf("input %s: malformed JSON: %s", path, msg)
	}
	if err := csvReadError(msg, files); err != nil {
		return err
	}
	if strings.Contains(msg, `"maximum_object_size" of`) {
		// DuckDB reads lines up to twice maximum_object_size and names the
		// bound it enforced: "(>33554424 bytes)".
		limit := maxJSONObjectBytes
		if m := jsonTooLong.FindStringSubmatch(msg); m != nil {
			limit, _ = strconv.Atoi(m[1])
		}
		for _, f := range files {
			if line := firstLongLine(f.Retained, limit); line > 0 {
				return fmt.Errorf("input %s: line %d: a JSON object longer than %d bytes, the most idem reads", f.Path, line, limit)
			}
		}
	}
	for _, f := range files {
		msg = strings.ReplaceAll(msg, f.Retained, f.Path)
	}
	if i := strings.Index(msg, "\nPossible fixes:"); i >= 0 {
		msg = msg[:i]
	}
	names := make([]string, len(files))
	for i, f := range files {
		names[i] = f.Path
	}
	return fmt.Errorf("read %s input %s: %s", format, strings.Join(names, ", "), strings.TrimSpace(msg))
}

// csvReadError rewrites DuckDB's "CSV Error on Line: N" as "input FILE:
// line N: reason", without the offending line itself (it can be megabytes
// long), the reader's options or its suggestions. Nil when msg is not one.
func csvReadError(msg string, files []InputFile) error {
	m := csvErrorLine.FindStringSubmatch(msg)
	if m == nil {
		return nil
	}
	path := ""
	if f := csvErrorFile.FindStringSubmatch(msg); f != nil {
		path = originalPath(files, strings.TrimSpace(f[1]))
	} else if len(files) == 1 {
		path = files[0].Path
	}
	// The reason is the last non-blank line between "Original Line:" (whose
	// text may span lines) and the suggestions.
	reason := ""
	lines := strings.Split(msg[strings.Index(msg, m[0])+len(m[0]):], "\n")
	for i, l := range lines {
		l = strings.TrimSpace(l)
		if strings.HasPrefix(l, "Possible") || strings.HasPrefix(l, "file = ") {
			break
		}
		if i == 0 || l == "" || strings.HasPrefix(l, "Original Line:") {
			continue
		}
		reason = l
	}
	if reason == "" {
		reason = "cannot be read as CSV"
	}
	if len(reason) > 300 {
		reason = reason[:300] + "..."
	}
	if path == "" {
		return fmt.Errorf("csv input: line %s: %s", m[1], reason)
	}
	return fmt.Errorf("input %s: line %s: %s", path, m[1], reason)
}

// firstLongLine finds the first line longer than limit bytes, 0 if none.
func firstLongLine(path string, limit int) int {
	f, err := os.Open(path)
	if err != nil {
		return 0
	}
	defer f.Close()
	r := bufio.NewReaderSize(f, 1<<20)
	n, length := 1, 0
	for {
		chunk, err := r.ReadSlice('\n')
		length += len(chunk)
		if len(chunk) > 0 && chunk[len(chunk)-1] == '\n' {
			if length-1 > limit {
				return n
			}
			n, length = n+1, 0
		}
		if err != nil && !errors.Is(err, bufio.ErrBufferFull) {
			if length > limit {
				return n
			}
			return 0
		}
	}
}

// firstBadJSONLine finds the first non-blank line that is not a JSON object
// or not valid UTF-8.
func firstBadJSONLine(path string) (int, string) {
	f, err := os.Open(path)
	if err != nil {
		return 0, ""
	}
	defer f.Close()
	r := bufio.NewReaderSize(f, 1<<20)
	n := 0
	for {
		line, err := r.ReadBytes('\n')
		if len(line) > 0 {
			n++
			t := bytes.TrimSpace(line)
			if len(t) > 0 && !utf8.Valid(t) {
				return n, "invalid UTF-8"
			}
			if len(t) > 0 {
				var obj map[string]json.RawMessage
				if jerr := json.Unmarshal(t, &obj); jerr != nil {
					return n, jerr.Error()
				}
			}
		}
		if err != nil {
			return 0, ""
		}
	}
}
