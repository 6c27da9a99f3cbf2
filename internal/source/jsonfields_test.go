package source

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

var vcColumns = []string{"change_id", "entity_id", "source_version", "operation", "value"}

// jsonFieldsCases are JSON Lines files and whether the Go scan proves
// them plain objects of known fields (false: left to DuckDB's scan).
var jsonFieldsCases = []struct {
	name, data string
	proven     bool
}{
	{"fixture rows", `{"change_id":"c-1","entity_id":"a","source_version":1,"operation":"upsert","value":"x"}` + "\n" + `{"change_id":"c-2","entity_id":"b","source_version":2,"operation":"delete","value":null}` + "\n", true},
	{"no final newline", `{"change_id":"c-1","value":17}`, true},
	{"empty object", "{}\n", true},
	{"spaces and tabs between tokens", "{ \"value\" :\t[1, 2.50, -0, true, false, null, {\"x\": \"y\"}] }\n", true},
	{"nested object with other names", `{"value":{"nested":[1,2],"other":{"a":"b"}}}` + "\n", true},
	{"escapes in values", `{"value":"a\"b\\c\/d\b\f\n\r\t\u00e9\u20AC"}` + "\n", true},
	{"utf-8 in values", `{"value":"héllo €𝄞"}` + "\n", true},

	{"a field twice", `{"value":1,"value":2}` + "\n", false},
	{"unexpected field", `{"change_id":"c-1","extra":1}` + "\n", false},
	{"unexpected field on a later line", `{"value":1}` + "\n" + `{"valu":1}` + "\n", false},
	{"escaped field name", `{"\u0076alue":1}` + "\n", false},
	{"blank line", `{"value":1}` + "\n\n" + `{"value":2}` + "\n", false},
	{"only a newline", "\n", false},
	{"space before the object", ` {"value":1}` + "\n", false},
	{"space after the object", `{"value":1} ` + "\n", false},
	{"crlf", "{\"value\":1}\r\n", false},
	{"two objects on a line", `{"value":1}{"value":2}` + "\n", false},
	{"array line", "[1,2,3]\n", false},
	{"string line", `"value"` + "\n", false},
	{"truncated", `{"change_id":"a"` + "\n", false},
	{"trailing comma", `{"value":1,}` + "\n", false},
	{"missing colon", `{"value" 1}` + "\n", false},
	{"unquoted name", `{value:1}` + "\n", false},
	{"single quotes", `{'value':1}` + "\n", false},
	{"exponent", `{"value":1e2}` + "\n", false},
	{"leading zero", `{"value":01}` + "\n", false},
	{"19 digits", `{"value":1234567890123456789}` + "\n", false},
	{"bare minus", `{"value":-}` + "\n", false},
	{"fraction without digits", `{"value":1.}` + "\n", false},
	{"NaN", `{"value":NaN}` + "\n", false},
	{"bad literal", `{"value":tru}` + "\n", false},
	{"control character in a string", "{\"value\":\"a\x01b\"}\n", false},
	{"tab in a string", "{\"value\":\"a\tb\"}\n", false},
	{"bad escape", `{"value":"a\qb"}` + "\n", false},
	{"lone surrogate escape", `{"value":"\ud800"}` + "\n", false},
	{"short unicode escape", `{"value":"\u12"}` + "\n", false},
	{"invalid utf-8", "{\"value\":\"\xff\"}\n", false},
	{"utf-8 surrogate bytes", "{\"value\":\"\xed\xa0\x80\"}\n", false},
	{"byte order mark", "\ufeff{\"value\":1}\n", false},
	{"unterminated string", `{"value":"abc}` + "\n", false},
	{"too deep", `{"value":` + strings.Repeat("[", 40) + strings.Repeat("]", 40) + "}\n", false},
	{"line over 1 MiB", `{"value":"` + strings.Repeat("x", 1<<20) + `"}` + "\n", false},
}

// TestJSONFieldsKnown: the scan proves plain objects of known fields and
// leaves everything else to DuckDB.
func TestJSONFieldsKnown(t *testing.T) {
	t.Parallel()
	known := map[string]bool{}
	for _, c := range vcColumns {
		known[c] = true
	}
	dir := t.TempDir()
	for i, tc := range jsonFieldsCases {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "_")+".jsonl")
			require.NoError(t, os.WriteFile(path, []byte(tc.data), 0o644), i)
			require.Equal(t, tc.proven, jsonFieldsKnown(path, known))
		})
	}
	require.False(t, jsonFieldsKnown(filepath.Join(dir, "missing.jsonl"), known), "an unreadable file is left to DuckDB")
}

// FuzzJSONFieldsKnown: whatever the Go scan proves, DuckDB's scan for
// unexpected fields (the one it replaces) reads without an error and finds
// none, and the reader the stage step reads takes every line; so skipping
// it changes no outcome and no error.
func FuzzJSONFieldsKnown(f *testing.F) {
	for _, tc := range jsonFieldsCases {
		if len(tc.data) < 1<<16 {
			f.Add([]byte(tc.data))
		}
	}
	ctx := context.Background()
	db, err := open(ctx, "")
	require.NoError(f, err)
	f.Cleanup(func() { db.Close() })
	db.SetMaxOpenConns(1)
	dir := f.TempDir()
	known := map[string]bool{}
	for _, c := range vcColumns {
		known[c] = true
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		path := filepath.Join(dir, "in.jsonl")
		require.NoError(t, os.WriteFile(path, data, 0o644))
		if len(data) == 0 || !jsonFieldsKnown(path, known) {
			return
		}
		_, err := db.ExecContext(ctx, "SET VARIABLE idem_input = ?", []string{path})
		require.NoError(t, err)
		for _, ignore := range []bool{false, true} {
			rows, err := db.QueryContext(ctx, extraFieldsQuery(ignore), vcColumns)
			require.NoError(t, err, "DuckDB's scan fails where the Go scan proved %q", data)
			has := rows.Next()
			require.NoError(t, rows.Close())
			require.False(t, has, "DuckDB's scan finds an unexpected field where the Go scan proved none: %q", data)
		}
		s := &stager{columns: vcColumns, checked: true}
		reader, err := s.jsonlReader(ctx, nil, nil)
		require.NoError(t, err)
		var n, values int64
		require.NoError(t, db.QueryRowContext(ctx, "SELECT count(*), count(change_id) + count(entity_id) + count(source_version) + count(operation) + count(value) FROM "+reader).Scan(&n, &values), "%q", data)
		require.Equal(t, int64(strings.Count(strings.TrimSuffix(string(data), "\n"), "\n")+1), n, "one row per line")
	})
}
