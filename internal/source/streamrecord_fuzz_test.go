package source

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/idem-dev/idem/internal/job"
)

// recordCorpus are stream record values that Go's JSON checks and DuckDB's
// JSON reader might judge apart: escapes (surrogates alone, in pairs, in
// keys, behind an escaped backslash), numbers past float64, NUL, raw
// characters JSON allows, nesting, duplicates below the top level, keys
// that differ from a column by case or a NUL, white space, and what is not
// JSON at all.
var recordCorpus = []string{
	`{"change_id":"c1","entity_id":"e1","source_version":1,"operation":"upsert","value":"\ud800"}`,
	`{"change_id":"c1","entity_id":"e1","source_version":1,"operation":"upsert","value":"\udc00"}`,
	`{"change_id":"c1","entity_id":"e1","source_version":1,"operation":"upsert","value":"\uD800\uDC00"}`,
	`{"change_id":"c1","value":"\ud83d\ude00 \ud83d"}`,
	`{"change_id":"c1","value":"\ude00\ud83d"}`,
	`{"change_id":"c1","value":"\ud800\ud800\udc00"}`,
	`{"change_id":"c1","value":"\ud800\u0041"}`,
	`{"change_id":"c1","value":"x\ud800"}`,
	`{"change_id":"c1","value":"\\ud800"}`,
	`{"change_id":"c1","value":"\\\ud800"}`,
	`{"change_id":"c1","value":"\\\\ud800"}`,
	`{"\ud800":1}`,
	`{"change_id":"c1","value":{"\udbff\udfff":["\udfff"]}}`,
	`{"change_id":"c1","value":"\u0000\u001f\u007f\u0080\ufffe\uffff"}`,
	"{\"change_id\":\"c1\",\"value\":\"\x7f\u2028\u2029\ufeff\U0010FFFF\"}",
	`{"change_id":"c1","value":"\"\\\/\b\f\n\r\t"}`,
	`{"source_version":1e400,"value":-1e400}`,
	`{"source_version":123456789012345678901234567890,"value":-0}`,
	`{"source_version":1E+2,"value":0.1e-999}`,
	`{"source_version":-9223372036854775809,"value":18446744073709551616}`,
	`{"value":true,"operation":false,"entity_id":null}`,
	`{"value":{},"entity_id":[],"change_id":[{}]}`,
	`{"value":{"a":1,"a":2},"entity_id":[{"b":1,"B":2}]}`,
	`{"value":` + strings.Repeat("[", 500) + strings.Repeat("]", 500) + `}`,
	`{"value":` + strings.Repeat(`{"a":`, 300) + `1` + strings.Repeat("}", 300) + `}`,
	`{"Value":"x","value":"y"}`,
	`{"value":"x","VALUE":"y","value\u0000":"z"}`,
	`{"value":"x","\u0076alue":"y"}`,
	`{"":1,"change_id":""}`,
	`{"ch\u0061nge_id":"c"}`,
	" \t\r\n{ \"change_id\" : \"c\" ,\n\"value\"\t:\r\"v\" } \n",
	`{}`,
	"\ufeff{\"change_id\":\"c\"}",
	`{"change_id":"c"}{"change_id":"d"}`,
	`{"change_id":'c'}`,
	`{"change_id":"c",}`,
	`{"change_id":NaN}`,
	`{"change_id":"c" /* comment */}`,
	`{"operation":"delete"}`,
	`{"operation":"upsert","entity_id":"e"}`,
	`[1]`,
	`"text"`,
	``,
}

// FuzzCheckRecordDuckDB: every stream record value that checkRecord lets
// through (as a value, or as a Kafka tombstone's key with the delete
// marker added) is read by DuckDB as the batch's stage reads it
// (stageInput over the batch's JSON Lines file, a good record on each
// side), without an error, each of its fields given to the pipeline's
// columns: a record DuckDB would refuse must be an invalid_* outcome,
// never a batch that fails on every run. The seed corpus (recordCorpus)
// runs in every go test; go test -fuzz FuzzCheckRecordDuckDB looks for
// more.
func FuzzCheckRecordDuckDB(f *testing.F) {
	for _, s := range recordCorpus {
		for _, ignoreExtra := range []bool{false, true} {
			f.Add([]byte(s), ignoreExtra, false)
		}
		f.Add([]byte(s), true, true)
	}
	ctx := context.Background()
	db, err := open(ctx, "")
	require.NoError(f, err)
	f.Cleanup(func() { db.Close() })
	db.SetMaxOpenConns(1)
	cols := map[string]bool{}
	for _, c := range vcColumns {
		cols[c] = true
	}
	good := `{"change_id":"g","entity_id":"e","source_version":1,"operation":"upsert","value":"v"}`
	f.Fuzz(func(t *testing.T, value []byte, ignoreExtra, tombstone bool) {
		rules := recordRules{maxBytes: 1 << 20, cols: cols, ignoreExtra: ignoreExtra, pipeline: "versioned_changes",
			marker: []markerField{{name: "operation", value: []byte(`"delete"`)}}}
		rec := Record{Value: value}
		if tombstone {
			rec = Record{Null: true, Key: value}
		}
		line, outcome, _ := checkRecord(rec, rules)
		if outcome != "" {
			return
		}
		path := filepath.Join(t.TempDir(), "batch.jsonl")
		text := good + "\n" + string(line) + "\n" + good + "\n"
		require.NoError(t, os.WriteFile(path, []byte(text), 0o644))
		tx, err := db.BeginTx(ctx, nil)
		require.NoError(t, err)
		defer tx.Rollback()
		files := []InputFile{{Path: path, Retained: path, Size: int64(len(text))}}
		_, err = stageInput(ctx, tx, files, job.FormatJSONL, vcColumns, ignoreExtra, true)
		require.NoError(t, err, "the stage refuses a record checkRecord accepted: %q", value)
		var n, values int64
		err = tx.QueryRowContext(ctx, "SELECT count(*), count(change_id) + count(entity_id) + count(source_version) + count(operation) + count(value) FROM input").Scan(&n, &values)
		require.NoError(t, err, "DuckDB refuses a record checkRecord accepted: %q as line %q", value, line)
		require.Equal(t, int64(3), n, "one row per record: %q", line)
	})
}

// decodedFields is checkFields as encoding/json's decoder judges the
// top-level names of a compact object, token by token: the reference that
// checkFields's single walk must agree with.
func decodedFields(text []byte, rules recordRules) string {
	dec := json.NewDecoder(bytes.NewReader(text))
	if _, err := dec.Token(); err != nil {
		return RejectJSON
	}
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return RejectJSON
		}
		k, _ := tok.(string)
		if seen[k] {
			return RejectDuplicateField
		}
		seen[k] = true
		if !rules.cols[k] && !rules.ignoreExtra {
			return RejectExtraField
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return RejectJSON
		}
	}
	return ""
}

// FuzzCheckFields: checkFields gives the outcome encoding/json's decoder
// gives for the field names of every value json.Compact accepts as an
// object (escaped names, names in nested values and strings holding
// braces, commas and quotes). The seeds run in every go test.
func FuzzCheckFields(f *testing.F) {
	for _, s := range append(slices.Clone(recordCorpus),
		`{"value":"a,\"b\":{","entity_id":"}"}`, `{"value":[{"value":1},"]"],"value":2}`,
		`{"value":"\\","change_id":"\\\"","entity_id":"e"}`, `{"entity_id":"e","\u0065ntity_id":"f"}`,
		`{"value":{"x":[1,{"y":"}"}]},"extra":1}`, `{"operation":"upsert","entity_id":"e","source_version":3}`,
		manyFields(15, "x1"), manyFields(16, "x1"), manyFields(17, "x1"), manyFields(40, "x39"), manyFields(40, "x40")) {
		f.Add([]byte(s), false)
		f.Add([]byte(s), true)
	}
	cols := map[string]bool{}
	for _, c := range vcColumns {
		cols[c] = true
	}
	f.Fuzz(func(t *testing.T, value []byte, ignoreExtra bool) {
		var line bytes.Buffer
		if !utf8.Valid(value) || json.Compact(&line, value) != nil || !bytes.HasPrefix(line.Bytes(), []byte("{")) || loneSurrogate(line.Bytes()) {
			return
		}
		rules := recordRules{maxBytes: 1 << 20, cols: cols, ignoreExtra: ignoreExtra}
		require.Equal(t, decodedFields(line.Bytes(), rules), checkFields(line.Bytes(), rules), "%q", line.String())
	})
}

// manyFields is an object of n fields x0 ... x(n-1), then one named last.
func manyFields(n int, last string) string {
	var b strings.Builder
	b.WriteString("{")
	for i := range n {
		fmt.Fprintf(&b, `"x%d":%d,`, i, i)
	}
	b.WriteString(`"` + last + `":0}`)
	return b.String()
}
