package jobfs

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/BurntSushi/toml"
	"github.com/idem-dev/idem/internal/report"
)

// KeyErrorFunc makes the *JobFileError of a key of a job file, key dotted
// ("target.table"), at the line that defines it.
type KeyErrorFunc func(key, format string, args ...any) error

// KeyErrors returns the KeyErrorFunc of the job file at path holding data.
func KeyErrors(path string, data []byte) KeyErrorFunc {
	return func(key, format string, args ...any) error {
		return &report.JobFileError{File: path, Line: keyLine(data, strings.Split(key, ".")), Key: key, Msg: fmt.Sprintf(format, args...)}
	}
}

// tomlError turns a decode error into a JobFileError with the line.
func tomlError(path string, data []byte, err error) error {
	var pe toml.ParseError
	if errors.As(err, &pe) {
		key := pe.LastKey
		msg := pe.Message
		if pe.Usage != "" {
			msg += " (" + strings.TrimSpace(pe.Usage) + ")"
		}
		if msg == "" {
			msg = pe.Error()
		}
		return &report.JobFileError{File: path, Line: pe.Position.Line, Key: key, Msg: msg, Err: err}
	}
	// Type mismatches ("toml: line 3 (last key "x"): incompatible types ...")
	msg := strings.TrimPrefix(err.Error(), "toml: ")
	line := 0
	if m := regexp.MustCompile(`^line (\d+)`).FindStringSubmatch(msg); m != nil {
		fmt.Sscanf(m[1], "%d", &line)
	}
	return &report.JobFileError{File: path, Line: line, Msg: msg, Err: err}
}

// keyLine finds the line that defines key in a TOML document: it follows
// table headers and matches "name =" inside the right table. 0 when unknown.
func keyLine(data []byte, key []string) int {
	if len(key) == 0 {
		return 0
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 64*1024), 16*1024*1024)
	var table []string
	n := 0
	for sc.Scan() {
		n++
		line := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(line, "[") {
			h := strings.Trim(strings.SplitN(line, "#", 2)[0], " []")
			table = splitDotted(h)
			if EqualKeys(table, key) {
				return n
			}
			continue
		}
		eq := strings.Index(line, "=")
		if eq <= 0 {
			continue
		}
		full := append(append([]string{}, table...), splitDotted(strings.TrimSpace(line[:eq]))...)
		if EqualKeys(full, key) || (len(full) > len(key) && EqualKeys(full[:len(key)], key)) {
			return n
		}
	}
	if len(key) > 1 {
		if l := keyLine(data, key[:len(key)-1]); l > 0 {
			return l
		}
	}
	return 0
}

// splitDotted splits a dotted TOML key into its parts, unquoted.
func splitDotted(s string) []string {
	parts := strings.Split(s, ".")
	for i, p := range parts {
		parts[i] = strings.Trim(strings.TrimSpace(p), `"'`)
	}
	return parts
}

// EqualKeys reports whether two keys have the same parts.
func EqualKeys(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// RuleLine finds the line of the i-th [[quality.rules]] header (0-based).
func RuleLine(data []byte, i int) int { return ArrayTableLine(data, "quality.rules", i) }

// ArrayTableLine is the line of the i-th (from 0) [[name]] header.
func ArrayTableLine(data []byte, name string, i int) int {
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 64*1024), 16*1024*1024)
	n, seen := 0, 0
	for sc.Scan() {
		n++
		line := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(line, "[[") && strings.Trim(strings.SplitN(line, "#", 2)[0], " []") == name {
			if seen == i {
				return n
			}
			seen++
		}
	}
	return 0
}

// KeyLine is the line of key (e.g. "input", "max_wait") in job file data;
// 0 when it is not found.
func KeyLine(data []byte, key ...string) int { return keyLine(data, key) }

// TOMLError turns an error of decoding the TOML file at path holding data
// into a *JobFileError with the line and the key.
func TOMLError(path string, data []byte, err error) error { return tomlError(path, data, err) }
