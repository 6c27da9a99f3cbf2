package source

import (
	"testing"

	"github.com/stretchr/testify/require"
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
			line, got := checkRecord(rec, 32, cols, c.ignoreExtra)
			require.Equal(t, c.want, got)
			require.Equal(t, c.line, string(line))
		})
	}
}
