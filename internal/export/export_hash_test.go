package export

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/idem-dev/idem/internal/report"
	"github.com/idem-dev/idem/internal/run"
	"github.com/idem-dev/idem/internal/source"

	"github.com/stretchr/testify/require"
)

// The sha256 an export reports must equal the sha256 of the finished file,
// for every format and for a file of many row groups and write buffers,
// which DuckDB 2.0 writes from several threads at once (CopyTo).
func TestCopyToReportsTheFileSHA256(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db, err := run.Open(context.Background(), filepath.Join(dir, "x.duckdb"), run.OpenOptions{})
	require.NoError(t, err)
	defer db.Close()
	query := `SELECT i AS id, md5(CAST(i AS VARCHAR)) AS payload, i % 97 AS day FROM range(400000) t(i) ORDER BY id`
	for _, format := range []string{"csv", "parquet", "jsonl"} {
		t.Run(format, func(t *testing.T) {
			out := filepath.Join(dir, "export."+format)
			rows, sum, size, err := CopyTo(context.Background(), db.SQL(), query, out, format, "", report.Progress{}, nil)
			require.NoError(t, err)
			require.EqualValues(t, 400000, rows)
			want, wantSize, err := source.FileSHA256(out)
			require.NoError(t, err)
			require.Equal(t, want, sum)
			require.Equal(t, wantSize, size)
			require.Greater(t, size, int64(1<<20), "large enough to be written in several pieces")
		})
	}
}
