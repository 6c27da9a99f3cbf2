package source

// What one stream record becomes before it is staged: a line of the
// batch's JSON Lines file, or a reject with its outcome (checkRecord,
// checkTombstone). Split from streambatch.go, which reads the batch.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"
	"unicode/utf8"

	"github.com/idem-dev/idem/internal/job"
)

// The outcomes of a stream record that is not one record the pipeline can
// read.
const (
	RejectSkippedEvent   = "skipped_event"
	RejectTooLarge       = "invalid_too_large"
	RejectTombstone      = "invalid_tombstone"
	RejectUTF8           = "invalid_utf8"
	RejectUnicode        = "invalid_unicode"
	RejectJSON           = "invalid_json"
	RejectDuplicateField = "invalid_duplicate_field"
	RejectExtraField     = "invalid_extra_field"
)

// recordRules are what checkRecord judges a stream record by: the job's
// max_record_bytes, the pipeline's columns, [input] extra_columns and the
// pipeline's delete marker.
type recordRules struct {
	maxBytes    int
	cols        map[string]bool
	ignoreExtra bool
	pipeline    string
	// marker is the pipeline's delete marker (pipeline.toml [tombstone]),
	// its columns in order with their values as JSON; none: a tombstone
	// is invalid.
	marker []markerField
}

type markerField struct {
	name  string
	value []byte
}

// rulesOf returns the rules job j's stream records are judged by.
func rulesOf(j *job.Job) (recordRules, error) {
	r := recordRules{maxBytes: j.Input.Stream.MaxRecordBytes, cols: map[string]bool{}, ignoreExtra: j.Input.ExtraColumns == job.ExtraIgnore, pipeline: j.Pipeline.Name}
	for _, c := range j.Pipeline.ColumnNames() {
		r.cols[c] = true
		v, ok := j.Pipeline.Tombstone[c]
		if !ok {
			continue
		}
		var b bytes.Buffer
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(v); err != nil {
			return r, fmt.Errorf("pipeline %s: tombstone.%s: %w", j.Pipeline.Name, c, err)
		}
		r.marker = append(r.marker, markerField{name: c, value: bytes.TrimSuffix(b.Bytes(), []byte("\n"))})
	}
	return r, nil
}

// checkRecord returns rec's value as one compact JSON line, or the outcome
// of a record that is not one record the pipeline reads: past maxBytes
// (or, as a line, maxRecordLine), invalid UTF-8, not one JSON object, a
// \u escape of half a surrogate pair or a top-level field twice (DuckDB
// would refuse the whole batch for either), or a field the pipeline does
// not read (cols) unless ignoreExtra. Every line it accepts, DuckDB's JSON
// reader reads as the batch's stage does (FuzzCheckRecordDuckDB). A tombstone is checkTombstone's. why, for a
// tombstone, says what made it invalid.
func checkRecord(rec Record, rules recordRules) (line []byte, outcome, why string) {
	switch {
	case rec.Skipped:
		return nil, RejectSkippedEvent, ""
	case rec.Oversize > 0 || len(rec.Value) > rules.maxBytes:
		return nil, RejectTooLarge, ""
	case rec.Null:
		line, outcome, why = checkTombstone(rec.Key, rules)
	default:
		line, outcome = checkObject(rec.Value, rules)
	}
	if outcome == "" && len(line) > maxRecordLine {
		return nil, RejectTooLarge, fmt.Sprintf("%d bytes as one JSON line, more than the %d of DuckDB's maximum_object_size", len(line), maxRecordLine)
	}
	return line, outcome, why
}

// maxRecordLine bounds a record's line in the batch's file, its delete
// marker added, whatever [input] max_record_bytes allows: the stage reads
// the file with maximum_object_size = maxJSONObject, and DuckDB refuses
// the whole file for a line past it (a line of 33 MiB was refused; lines
// of 16 MiB are read wherever they fall in the file).
const maxRecordLine = maxJSONObjectBytes

// checkTombstone returns the input row of a Kafka tombstone: its message
// key, checked as a value is (one JSON object of the pipeline's fields),
// with the pipeline's delete marker added. The row then meets the
// pipeline's own checks, so a key without the ordering column is the
// pipeline's invalid_version (or the like), never a delete idem gave a
// version: an old replay cannot undo it, and it cannot undo a newer
// version. A pipeline without a marker, a tombstone without a key, a key
// that is not one JSON object or that gives a marker column another value
// is invalid_tombstone.
func checkTombstone(key []byte, rules recordRules) (line []byte, outcome, why string) {
	switch {
	case len(rules.marker) == 0:
		return nil, RejectTombstone, fmt.Sprintf("pipeline %s has no delete a tombstone could be (pipeline.toml [tombstone])", rules.pipeline)
	case len(key) == 0:
		return nil, RejectTombstone, "a tombstone without a message key deletes nothing"
	case len(key) > rules.maxBytes:
		return nil, RejectTooLarge, "its message key"
	}
	line, outcome = checkObject(key, rules)
	switch outcome {
	case "":
	case RejectJSON:
		return nil, RejectTombstone, "its message key is not one JSON object"
	default:
		return nil, outcome, "its message key"
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(line, &fields); err != nil {
		return nil, RejectTombstone, "its message key is not one JSON object"
	}
	row := bytes.TrimSuffix(line, []byte("}"))
	for _, m := range rules.marker {
		if v, ok := fields[m.name]; ok {
			if !sameJSON(v, m.value) {
				return nil, RejectTombstone, fmt.Sprintf("its message key gives %s another value than the delete marker %s", m.name, m.value)
			}
			continue
		}
		if row[len(row)-1] != '{' {
			row = append(row, ',')
		}
		row = strconv.AppendQuote(row, m.name)
		row = append(row, ':')
		row = append(row, m.value...)
	}
	return append(row, '}'), "", ""
}

// sameJSON: a and b are one JSON value ("delete" and "d\u0065lete").
func sameJSON(a, b []byte) bool {
	var x, y any
	return json.Unmarshal(a, &x) == nil && json.Unmarshal(b, &y) == nil && reflect.DeepEqual(x, y)
}

// checkObject returns value as one compact JSON line, or the outcome of a
// value that is not one JSON object of the pipeline's fields.
func checkObject(value []byte, rules recordRules) ([]byte, string) {
	if !utf8.Valid(value) {
		return nil, RejectUTF8
	}
	var line bytes.Buffer
	if err := json.Compact(&line, value); err != nil || !bytes.HasPrefix(line.Bytes(), []byte("{")) {
		return nil, RejectJSON
	}
	if loneSurrogate(line.Bytes()) {
		return nil, RejectUnicode
	}
	if outcome := checkFields(line.Bytes(), rules); outcome != "" {
		return nil, outcome
	}
	return line.Bytes(), ""
}

// checkFields judges the top-level field names of text, one JSON object
// that json.Compact has checked and compacted (no white space outside
// strings, a backslash only inside a string): a name twice is
// invalid_duplicate_field, one the pipeline does not read
// invalid_extra_field unless ignoreExtra. It walks the text once instead
// of decoding it token by token (a third of a stream batch's read was
// encoding/json's decoder); names are compared unescaped, as the decoder
// gave them ("\u0076alue" is "value").
func checkFields(text []byte, rules recordRules) string {
	// The names seen, compared by their bytes (unescaped when escaped): a
	// record has a handful, so a scan beats a map, up to 16 names; past
	// them (extra fields ignored) a map keeps the walk linear.
	var seenBuf [16][]byte
	seen := seenBuf[:0]
	var many map[string]bool
	i := 1 // past '{'
	for i < len(text) && text[i] != '}' {
		if text[i] == ',' {
			i++
		}
		end := stringEnd(text, i)
		if end < 0 {
			return RejectJSON
		}
		k := text[i+1 : end]
		if bytes.IndexByte(k, '\\') >= 0 {
			var name string
			if err := json.Unmarshal(text[i:end+1], &name); err != nil {
				return RejectJSON
			}
			k = []byte(name)
		}
		if many != nil {
			if many[string(k)] {
				return RejectDuplicateField
			}
			many[string(k)] = true
		} else {
			for _, s := range seen {
				if bytes.Equal(s, k) {
					return RejectDuplicateField
				}
			}
			if seen = append(seen, k); len(seen) == len(seenBuf) {
				many = make(map[string]bool, 2*len(seen))
				for _, s := range seen {
					many[string(s)] = true
				}
			}
		}
		if !rules.ignoreExtra && !rules.cols[string(k)] {
			return RejectExtraField
		}
		i = valueEnd(text, end+2) // past the name's closing quote and ':'
		if i < 0 {
			return RejectJSON
		}
	}
	return ""
}

// stringEnd returns the index of the closing quote of the JSON string
// that starts at text[i], or -1.
func stringEnd(text []byte, i int) int {
	if i >= len(text) || text[i] != '"' {
		return -1
	}
	for j := i + 1; j < len(text); j++ {
		switch text[j] {
		case '\\':
			j++
		case '"':
			return j
		}
	}
	return -1
}

// valueEnd returns the index just past the compact JSON value that starts
// at text[i] (the ',' or '}' that follows it in its object), or -1.
func valueEnd(text []byte, i int) int {
	depth := 0
	for ; i < len(text); i++ {
		switch text[i] {
		case '"':
			if i = stringEnd(text, i); i < 0 {
				return -1
			}
		case '{', '[':
			depth++
		case ']':
			depth--
		case '}':
			if depth == 0 {
				return i
			}
			depth--
		case ',':
			if depth == 0 {
				return i
			}
		}
	}
	return -1
}

// loneSurrogate says whether compact JSON text holds a \u escape of half a
// UTF-16 surrogate pair without its other half ("\ud800", "\udc00",
// "\ud800\u0041"): encoding/json reads it as U+FFFD, DuckDB's reader
// refuses it, and with it the whole file. In compact JSON a backslash is
// always inside a string.
func loneSurrogate(text []byte) bool {
	for i := 0; i < len(text); i++ {
		if text[i] != '\\' {
			continue
		}
		if i+1 < len(text) && text[i+1] != 'u' {
			i++ // \" \\ \/ \b \f \n \r \t
			continue
		}
		r, ok := hex4(text, i+2)
		switch {
		case !ok:
			return false // json.Compact let no such escape through
		case r >= 0xDC00 && r <= 0xDFFF:
			return true
		case r >= 0xD800 && r <= 0xDBFF:
			if i+7 >= len(text) || text[i+6] != '\\' || text[i+7] != 'u' {
				return true
			}
			lo, ok := hex4(text, i+8)
			if !ok || lo < 0xDC00 || lo > 0xDFFF {
				return true
			}
			i += 11
		default:
			i += 5
		}
	}
	return false
}

// hex4 reads the four hex digits at text[i:].
func hex4(text []byte, i int) (rune, bool) {
	if i+4 > len(text) {
		return 0, false
	}
	n, err := strconv.ParseUint(string(text[i:i+4]), 16, 16)
	return rune(n), err == nil
}
