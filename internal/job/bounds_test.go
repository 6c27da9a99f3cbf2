package job

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idem-dev/idem/internal/jobfs"
	"github.com/idem-dev/idem/internal/report"
	"github.com/idem-dev/idem/pipelines"
)

// boundsHead is a valid job file; the cases append to it.
const boundsHead = "name = \"s\"\npipeline = \"sample\"\ntransform_version = 1\nschema_version = 1\n"

// TestJobFileBounds: a job file too large or nested too deep is refused
// before it is decoded, at once, as a *JobFileError (exit 2) naming the
// file, the line and the bound; one within the bounds loads.
func TestJobFileBounds(t *testing.T) {
	t.Parallel()
	deep := func(n int) string {
		return boundsHead + "[params]\ncap = " + strings.Repeat("{a = ", n) + "1" + strings.Repeat("}", n) + "\n"
	}
	padded := func(size int) string { // boundsHead and comment lines, size bytes
		var b strings.Builder
		b.WriteString(boundsHead)
		for b.Len() < size {
			line := "# " + strings.Repeat("x", max(0, min(97, size-b.Len()-3))) + "\n"
			if size-b.Len() < 3 {
				line = strings.Repeat("\n", size-b.Len())
			}
			b.WriteString(line)
		}
		return b.String()
	}
	over := padded(jobfs.MaxTOMLBytes + 1)
	cases := []struct {
		name, text string
		err        string // "" loads
	}{
		{"100,000 deep", deep(100000), "job.toml:6: arrays and tables nest deeper than 32 levels, the most idem reads of a job file or pipeline.toml"},
		{"6,000 deep", deep(6000), "job.toml:6: arrays and tables nest deeper than 32 levels, the most idem reads of a job file or pipeline.toml"},
		{"one past the depth", boundsHead + "[params]\nlicenses = " + strings.Repeat("[", 33) + "]", "job.toml:6: arrays and tables nest deeper than 32 levels, the most idem reads of a job file or pipeline.toml"},
		{"at the size bound", padded(jobfs.MaxTOMLBytes), ""},
		{"one past the size", over, "job.toml:" + itoa(1+bytes.Count([]byte(over[:jobfs.MaxTOMLBytes]), []byte("\n"))) + ": the file is larger than 1048576 bytes (1 MiB), the most idem reads of a job file or pipeline.toml"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			path := filepath.Join(dir, "job.toml")
			require.NoError(t, os.WriteFile(path, []byte(c.text), 0o644))
			began := time.Now()
			_, loadErr := LoadJob(path, pipelines.FS)
			_, parseErr := ParseJob(path, []byte(c.text), pipelines.FS)
			took := time.Since(began)
			t.Logf("%d bytes: LoadJob and ParseJob took %s", len(c.text), took)
			for _, err := range []error{loadErr, parseErr} {
				if c.err == "" {
					require.NoError(t, err)
					continue
				}
				require.EqualError(t, err, filepath.Join(dir, c.err))
				require.Equal(t, report.ExitUsage, report.ExitCode(err))
			}
			if c.err != "" {
				require.Less(t, took, time.Second, "refused before decoding")
			}
		})
	}
}

// TestReadJobFileLarge: a large file is refused without being read whole.
func TestReadJobFileLarge(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "big.toml")
	f, err := os.Create(path)
	require.NoError(t, err)
	require.NoError(t, f.Truncate(4<<30)) // sparse: 4 GiB of NUL, one line
	require.NoError(t, f.Close())
	began := time.Now()
	_, err = jobfs.ReadJobFile(path)
	require.EqualError(t, err, path+":1: the file is larger than 1048576 bytes (1 MiB), the most idem reads of a job file or pipeline.toml")
	require.Less(t, time.Since(began), time.Second)
}

// TestPipelineFileBounds: a pipeline.toml on disk has the same bounds.
func TestPipelineFileBounds(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "p"), 0o755))
	pipe := "name = \"p\"\nmode = \"refresh\"\nkey = " + strings.Repeat("[", 100000) + "\n"
	require.NoError(t, os.WriteFile(filepath.Join(dir, "p", "pipeline.toml"), []byte(pipe), 0o644))
	job := "name = \"s\"\npipeline = \"p\"\ntransform_version = 1\nschema_version = 1\n"
	require.NoError(t, os.WriteFile(filepath.Join(dir, "job.toml"), []byte(job), 0o644))
	_, err := LoadJob(filepath.Join(dir, "job.toml"), pipelines.FS)
	real, _ := filepath.EvalSymlinks(filepath.Join(dir, "p"))
	require.EqualError(t, err, filepath.Join(real, "pipeline.toml")+":3: arrays and tables nest deeper than 32 levels, the most idem reads of a job file or pipeline.toml")
}

func itoa(n int) string { return strconv.Itoa(n) }
