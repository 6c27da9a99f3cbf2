package source

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idem-dev/idem/internal/job"
	"github.com/idem-dev/idem/internal/report"
	"github.com/idem-dev/idem/pipelines"
)

// TestCheckRecord: each way a stream record is not one record the pipeline
// reads has its outcome; a good record is its value as one compact line.
func TestCheckRecord(t *testing.T) {
	t.Parallel()
	cols := map[string]bool{"id": true, "v": true}
	cases := []struct {
		name, value string
		rec         Record
		ignoreExtra bool
		line, want  string
	}{
		{name: "good", value: "{ \"id\": 1,\n \"v\": {\"a\": [1, 2]} }", line: `{"id":1,"v":{"a":[1,2]}}`},
		{name: "a field missing is the pipeline's to judge", value: `{"id":1}`, line: `{"id":1}`},
		{name: "an escaped key is its text", value: `{"i\u0064":1}`, line: `{"i\u0064":1}`},
		{name: "too large", value: `{"id":"` + string(make([]byte, 40)) + `"}`, want: RejectTooLarge},
		{name: "cut by the reader", rec: Record{Value: []byte(`{"id":`), Oversize: 9 << 20}, want: RejectTooLarge},
		{name: "tombstone", rec: Record{Null: true}, want: RejectTombstone},
		{name: "empty", value: "", want: RejectJSON},
		{name: "invalid utf-8", value: "{\"id\":\"\xff\"}", want: RejectUTF8},
		{name: "a lone high surrogate", value: `{"id":"\ud800"}`, want: RejectUnicode},
		{name: "a lone low surrogate", value: `{"id":"\uDC00x"}`, want: RejectUnicode},
		{name: "a high surrogate and no low", value: `{"id":"\ud800\u0041"}`, want: RejectUnicode},
		{name: "a lone surrogate in a key", value: `{"\ud83d":1}`, want: RejectUnicode},
		{name: "a surrogate pair", value: `{"id":"\ud83d\ude00"}`, line: `{"id":"\ud83d\ude00"}`},
		{name: "an escaped backslash before u", value: `{"id":"\\ud800"}`, line: `{"id":"\\ud800"}`},
		{name: "an array", value: `[1]`, want: RejectJSON},
		{name: "two objects", value: `{} {}`, want: RejectJSON},
		{name: "truncated", value: `{"id":`, want: RejectJSON},
		{name: "a field twice", value: `{"id":1,"v":2,"id":3}`, want: RejectDuplicateField},
		{name: "a field twice by escape", value: `{"id":1,"\u0069d":3}`, want: RejectDuplicateField},
		{name: "a field the pipeline does not read", value: `{"id":1,"extra":2}`, want: RejectExtraField},
		{name: "extra_columns = ignore", value: `{"id":1,"extra":2}`, ignoreExtra: true, line: `{"id":1,"extra":2}`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			rec := c.rec
			if rec.Value == nil && !rec.Null {
				rec.Value = []byte(c.value)
			}
			line, got, _ := checkRecord(rec, recordRules{maxBytes: 32, cols: cols, ignoreExtra: c.ignoreExtra, pipeline: "p"})
			require.Equal(t, c.want, got)
			require.Equal(t, c.line, string(line))
		})
	}
}

// TestCheckTombstone: a Kafka tombstone is one input row, its message key
// with the pipeline's delete marker added, when the pipeline declares one;
// the row's ordering comes from the key alone (the pipeline's own checks
// judge it), and a tombstone that cannot be such a row is an invalid_*
// outcome saying why.
func TestCheckTombstone(t *testing.T) {
	t.Parallel()
	vc, err := rulesOf(loadTestJob(t, "versioned_changes"))
	require.NoError(t, err)
	require.Equal(t, []markerField{{name: "operation", value: []byte(`"delete"`)}}, vc.marker)
	orders, err := rulesOf(loadTestJob(t, "orders"))
	require.NoError(t, err)
	merge, err := rulesOf(loadTestJob(t, "merge_by_key"))
	require.NoError(t, err)
	require.Empty(t, merge.marker)
	vc.maxBytes, orders.maxBytes, merge.maxBytes = 200, 200, 200
	cases := []struct {
		name  string
		rules recordRules
		key   string
		line  string // the row written, when the tombstone is one
		want  string // else its outcome
		why   string
	}{
		{name: "a delete of the key", rules: vc, key: `{"change_id":"d2", "entity_id":"e1","source_version":2}`,
			line: `{"change_id":"d2","entity_id":"e1","source_version":2,"operation":"delete"}`},
		{name: "the marker already in the key", rules: vc, key: `{"entity_id":"e1","operation":"delete","change_id":"d"}`,
			line: `{"entity_id":"e1","operation":"delete","change_id":"d"}`},
		{name: "the marker escaped in the key", rules: vc, key: `{"operation":"d\u0065lete"}`, line: `{"operation":"d\u0065lete"}`},
		{name: "no version: the pipeline's to judge (invalid_version)", rules: vc, key: `{"change_id":"d","entity_id":"e1"}`,
			line: `{"change_id":"d","entity_id":"e1","operation":"delete"}`},
		{name: "an empty object: the pipeline's to judge", rules: vc, key: `{}`, line: `{"operation":"delete"}`},
		{name: "orders' kind", rules: orders, key: `{"order_id":"o1","position":7,"schema_version":3}`,
			line: `{"order_id":"o1","position":7,"schema_version":3,"kind":"delete"}`},
		{name: "a pipeline without a delete", rules: merge, key: `{"id":1}`, want: RejectTombstone, why: "pipeline merge_by_key has no delete a tombstone could be (pipeline.toml [tombstone])"},
		{name: "no key", rules: vc, want: RejectTombstone, why: "a tombstone without a message key deletes nothing"},
		{name: "key text", rules: vc, key: `e1`, want: RejectTombstone, why: "its message key is not one JSON object"},
		{name: "key an array", rules: vc, key: `["e1"]`, want: RejectTombstone, why: "its message key is not one JSON object"},
		{name: "key two objects", rules: vc, key: `{} {}`, want: RejectTombstone, why: "its message key is not one JSON object"},
		{name: "key a JSON string", rules: vc, key: `"e1"`, want: RejectTombstone, why: "its message key is not one JSON object"},
		{name: "key not UTF-8", rules: vc, key: "{\"entity_id\":\"e\xff\"}", want: RejectUTF8, why: "its message key"},
		{name: "key field twice", rules: vc, key: `{"entity_id":"a","entity_id":"b"}`, want: RejectDuplicateField, why: "its message key"},
		{name: "key field unknown", rules: vc, key: `{"entity_id":"a","colour":"red"}`, want: RejectExtraField, why: "its message key"},
		{name: "key field unknown, extra_columns = ignore", rules: func() recordRules { r := vc; r.ignoreExtra = true; return r }(),
			key: `{"entity_id":"a","colour":"red"}`, line: `{"entity_id":"a","colour":"red","operation":"delete"}`},
		{name: "key too large", rules: vc, key: `{"entity_id":"` + strings.Repeat("x", 200) + `"}`, want: RejectTooLarge, why: "its message key"},
		{name: "key says upsert", rules: vc, key: `{"entity_id":"e1","operation":"upsert"}`, want: RejectTombstone, why: `its message key gives operation another value than the delete marker "delete"`},
		{name: "key says null", rules: vc, key: `{"entity_id":"e1","operation":null}`, want: RejectTombstone, why: `its message key gives operation another value than the delete marker "delete"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			rec := Record{Null: true}
			if c.key != "" {
				rec.Key = []byte(c.key)
			}
			line, got, why := checkRecord(rec, c.rules)
			require.Equal(t, c.want, got)
			require.Equal(t, c.why, why)
			require.Equal(t, c.line, string(line))
		})
	}
}

// loadTestJob loads a job of the built-in pipeline reading a Kafka topic.
func loadTestJob(t *testing.T, pipeline string) *job.Job {
	t.Helper()
	text := fmt.Sprintf("name = \"j\"\npipeline = %q\ntransform_version = 1\nschema_version = 1\n[input]\nkind = \"kafka\"\nbrokers = [\"127.0.0.1:9092\"]\ntopic = \"t\"\n", pipeline)
	if pipeline == "merge_by_key" {
		text += "[input.columns]\nid = \"BIGINT\"\nv = \"BIGINT\"\nname = \"VARCHAR\"\n[target]\nkey = [\"id\"]\norder_by = \"v\"\n"
	}
	p := filepath.Join(t.TempDir(), "j.toml")
	require.NoError(t, os.WriteFile(p, []byte(text), 0o644))
	j, err := job.LoadJob(p, pipelines.FS)
	require.NoError(t, err)
	return j
}

// TestCheckRecordLine: a record whose line passes maxRecordLine (DuckDB's
// maximum_object_size) is invalid_too_large whatever max_record_bytes
// allows: DuckDB's reader would refuse the whole batch.
func TestCheckRecordLine(t *testing.T) {
	t.Parallel()
	rules := recordRules{maxBytes: 1 << 30, cols: map[string]bool{"id": true}, pipeline: "p"}
	at := func(n int) Record {
		return Record{Value: []byte(`{"id":"` + strings.Repeat("x", n-len(`{"id":""}`)) + `"}`)}
	}
	line, got, _ := checkRecord(at(maxRecordLine), rules)
	require.Empty(t, got)
	require.Len(t, line, maxRecordLine)
	_, got, why := checkRecord(at(maxRecordLine+1), rules)
	require.Equal(t, RejectTooLarge, got)
	require.Equal(t, "16777217 bytes as one JSON line, more than the 16777216 of DuckDB's maximum_object_size", why)
}

// fixedReader gives its records on every read.
type fixedReader struct{ recs []Record }

func (r fixedReader) Read(context.Context, map[string]int64, int, time.Duration) ([]Record, []Gap, error) {
	return r.recs, nil, nil
}
func (fixedReader) Close() error { return nil }

// TestStreamBatchLinkedIntoStore: a batch read from the committed state a
// follower knows (no database read) is written once, under a temporary
// name (which the snapshot records), and linked where the store keeps it:
// Retain finds that copy and makes none, and removing the batch's file
// leaves the store's.
func TestStreamBatchLinkedIntoStore(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dbPath := filepath.Join(t.TempDir(), "x.duckdb")
	j := loadTestJob(t, "versioned_changes")
	var recs []Record
	for i := range 3 {
		recs = append(recs, Record{Partition: "0", Position: int64(10 + i), Value: fmt.Appendf(nil, `{"change_id":"c%d","entity_id":"e","source_version":%d,"operation":"upsert","value":"v"}`, i, i)})
	}
	known := &Committed{Positions: map[string]int64{"0": 10}}
	b, err := ReadStreamBatchKnown(ctx, nil, j, fixedReader{recs}, StreamDir(dbPath), false, known)
	require.NoError(t, err)
	require.Equal(t, "t:0:10-12", b.ID)
	require.Equal(t, map[string]int64{"0": 10}, b.From)
	require.Equal(t, &Committed{Positions: map[string]int64{"0": 13}}, b.After())
	require.True(t, strings.HasPrefix(filepath.Base(b.File.Path), tempPrefix+"stream-"), b.File.Path)
	stored := RetainedPath(dbPath, b.File.SHA256)
	same := func() bool {
		a, err := os.Stat(b.File.Path)
		require.NoError(t, err)
		s, err := os.Stat(stored)
		require.NoError(t, err)
		return os.SameFile(a, s)
	}
	require.True(t, same(), "the batch's file is linked into the store")
	files := []InputFile{b.File}
	require.NoError(t, Retain(ctx, dbPath, files, report.Progress{}))
	require.Equal(t, stored, files[0].Retained)
	require.True(t, same(), "Retain kept the linked copy")
	b.Remove()
	require.NoFileExists(t, b.File.Path)
	data, err := os.ReadFile(stored)
	require.NoError(t, err)
	require.Equal(t, b.File.Size, int64(len(data)))
	require.Equal(t, 3, strings.Count(string(data), "\n"))
}
