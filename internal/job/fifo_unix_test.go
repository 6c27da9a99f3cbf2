//go:build unix

package job

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idem-dev/idem/internal/jobfs"
	"github.com/idem-dev/idem/pipelines"
)

// A job file that is a FIFO (or a link to one) is refused at once: opening
// it would wait for a writer for ever.
func TestJobFileFIFO(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	fifo := filepath.Join(dir, "j.toml")
	require.NoError(t, syscall.Mkfifo(fifo, 0o644))
	_, err := jobfs.ReadJobFile(fifo)
	require.ErrorContains(t, err, "cannot read job file: not a regular file")
}

// A model file, or a pipeline's SQL file, that is a FIFO is refused at
// once, as a job file is.
func TestSQLFileFIFO(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, top, sql, fifo string }{
		{"model file", "", `sql = "models/daily.sql"`, "models/daily.sql"},
		{"numbered model", "transform_version = 1\n", `sql = "models/daily"`, "models/daily/v1.sql"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			require.NoError(t, os.MkdirAll(filepath.Join(dir, "models", "daily"), 0o755))
			require.NoError(t, syscall.Mkfifo(filepath.Join(dir, tc.fifo), 0o644))
			job := "name = \"daily\"\npipeline = \"select\"\n" + tc.top + "[input]\nupstream = [\"src\"]\n[transform]\n" + tc.sql + "\n[target]\nkey = [\"day\"]\n"
			require.NoError(t, os.WriteFile(filepath.Join(dir, "daily.toml"), []byte(job), 0o644))
			done := make(chan error, 1)
			go func() {
				_, err := LoadJob(filepath.Join(dir, "daily.toml"), pipelines.FS)
				done <- err
			}()
			select {
			case err := <-done:
				require.ErrorContains(t, err, "not a regular file")
			case <-time.After(10 * time.Second):
				t.Fatal("loading a job whose model is a FIFO waits for a writer")
			}
		})
	}
}
