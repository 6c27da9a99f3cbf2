package source

import (
	"bytes"
	"database/sql"
	"os"
	"path/filepath"
	"testing"

	"github.com/idem-dev/idem/internal/job"

	"github.com/stretchr/testify/require"
)

// Rewriting a retained input without one key keeps every other row's bytes
// exactly, in csv (quoted fields, embedded newlines, CRLF) and jsonl (string
// and number keys, blank lines), and reports the highest position dropped.
func TestFilterKeepsOtherRowsBytes(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, format, in, want string
		removed                int64
		pos                    int64
	}{
		{"csv", job.FormatCSV,
			"id,pos,note\r\n7,1,\"a, b\"\r\n8,2,\"multi\nline\"\r\n7,5,x\r\n9,3,\"\"\"q\"\"\"\r\n",
			"id,pos,note\r\n8,2,\"multi\nline\"\r\n9,3,\"\"\"q\"\"\"\r\n", 2, 5},
		{"csv without final newline", job.FormatCSV,
			"id,pos\n1,1\n7,9", "id,pos\n1,1\n", 1, 9},
		{"jsonl", job.FormatJSONL,
			"{\"id\":\"7\",\"pos\":4}\n\n{\"id\": 8, \"pos\": 2}\n{\"id\":7,\"pos\":\"6\"}\n{\"id\":\"70\",\"pos\":1}",
			"\n{\"id\": 8, \"pos\": 2}\n{\"id\":\"70\",\"pos\":1}", 2, 6},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			src := filepath.Join(t.TempDir(), "in")
			require.NoError(t, os.WriteFile(src, []byte(c.in), 0o644))
			var out bytes.Buffer
			flt := KeyFilter("id", "pos", "7")
			var removed int64
			var pos sql.NullInt64
			var err error
			if c.format == job.FormatCSV {
				removed, pos, err = filterCSV(src, &out, flt)
			} else {
				removed, pos, err = filterJSONL(src, &out, flt)
			}
			require.NoError(t, err)
			require.Equal(t, c.want, out.String())
			require.Equal(t, c.removed, removed)
			require.Equal(t, sql.NullInt64{Int64: c.pos, Valid: true}, pos)
		})
	}
}

// A composite key's filter (TupleFilter) drops a row only when every one
// of its columns holds its value; MatchFilter drops it when any does. A
// csv file lacking one of the key's columns is refused, not kept whole.
func TestTupleFilter(t *testing.T) {
	t.Parallel()
	in := "region,sku,note\neu,7,a\neu,8,b\nus,7,c\n"
	cases := []struct {
		name string
		flt  RowFilter
		want string
		err  string
	}{
		{"all columns", TupleFilter("", map[string][]string{"region": {"eu"}, "sku": {"7"}}), "region,sku,note\neu,8,b\nus,7,c\n", ""},
		{"any column", MatchFilter("", map[string][]string{"region": {"eu"}, "sku": {"7"}}), "region,sku,note\n", ""},
		{"a column missing", TupleFilter("", map[string][]string{"region": {"eu"}, "size": {"7"}}), "", "the key columns region, size are not all in the file"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			src := filepath.Join(t.TempDir(), "in")
			require.NoError(t, os.WriteFile(src, []byte(in), 0o644))
			var out bytes.Buffer
			_, _, err := filterCSV(src, &out, c.flt)
			if c.err != "" {
				require.ErrorContains(t, err, c.err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, c.want, out.String())
		})
	}
	require.Equal(t, `((CAST("region" AS VARCHAR) IN ('eu')) AND (CAST("sku" AS VARCHAR) IN ('7')))`,
		TupleSQL(map[string][]string{"sku": {"7"}, "region": {"eu"}}, map[string]bool{"region": true, "sku": true}))
	require.Empty(t, TupleSQL(map[string][]string{"sku": {"7"}, "region": {"eu"}}, map[string]bool{"region": true}))
}
