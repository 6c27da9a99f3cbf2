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
