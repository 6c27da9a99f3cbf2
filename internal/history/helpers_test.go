package history_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/idem-dev/idem/internal/job"
	"github.com/idem-dev/idem/internal/run"
	"github.com/idem-dev/idem/pipelines"
	"github.com/stretchr/testify/require"
)

// The helpers of run's tests (run/run_test.go) that the export tests use.

func fixture(t *testing.T, rel string) string {
	t.Helper()
	p, err := filepath.Abs(filepath.Join("../..", rel))
	require.NoError(t, err)
	return p
}

func writeJob(t *testing.T, dir, body string) string {
	t.Helper()
	p := filepath.Join(dir, "job.toml")
	require.NoError(t, os.WriteFile(p, []byte(body), 0o644))
	return p
}

func sampleJob(t *testing.T, dir, pipeline, input string) *job.Job {
	t.Helper()
	path := writeJob(t, dir, fmt.Sprintf(`name = "devil"
pipeline = %q
transform_version = 1
schema_version = 1
database = %q

[input]
path = %q

[target]
table = "devil_target"
`, pipeline, filepath.Join(dir, "idem.duckdb"), input))
	j, err := run.LoadJob(path, pipelines.FS)
	require.NoError(t, err)
	return j
}

func openDB(t *testing.T, path string) *run.DB {
	t.Helper()
	db, err := run.Open(context.Background(), path, run.OpenOptions{DuckDB: job.DuckDBSettings{Threads: 1}})
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	return db
}
