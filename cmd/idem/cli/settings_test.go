package cli

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/idem-dev/idem/internal/job"

	"github.com/stretchr/testify/require"
)

// The job file's [duckdb] table sets memory_limit, threads and
// temp_directory; a flag overrides each one.
func TestDuckDBSettingsFromJobAndFlags(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	input, err := filepath.Abs("../../../fixtures/sample/occurrences-a.csv")
	require.NoError(t, err)
	jobPath := filepath.Join(dir, "job.toml")
	require.NoError(t, os.WriteFile(jobPath, []byte(fmt.Sprintf(`name = "s"
pipeline = "sample"
transform_version = 1
schema_version = 1
database = %q

[input]
path = %q

[target]
table = "t"

[duckdb]
memory_limit = "1GB"
threads = 1
temp_directory = %q
`, filepath.Join(dir, "s.duckdb"), input, filepath.Join(dir, "job-spill"))), 0o644))
	cases := []struct {
		name string
		f    dbFlags
		want job.DuckDBSettings
	}{
		{"job file", dbFlags{}, job.DuckDBSettings{MemoryLimit: "1GB", Threads: 1, TempDirectory: filepath.Join(dir, "job-spill")}},
		{"flags override", dbFlags{memoryLimit: "2GB", threads: 2, tempDir: "/x"}, job.DuckDBSettings{MemoryLimit: "2GB", Threads: 2, TempDirectory: "/x"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p, name, err := tc.f.openOne(context.Background(), jobPath)
			require.NoError(t, err)
			info, err := p.Job(name)
			require.NoError(t, err)
			require.Equal(t, tc.want, job.DuckDBSettings{MemoryLimit: info.MemoryLimit, Threads: info.Threads, TempDirectory: info.TempDirectory})
		})
	}

	// End to end: a run with the job's settings, then a query whose flags
	// set other values, reading them back from DuckDB.
	var out, errOut bytes.Buffer
	code := Main(context.Background(), []string{"run", jobPath}, &out, &errOut)
	require.Equal(t, 0, code, errOut.String())
	require.Empty(t, errOut.String(), "no progress output when stderr is not a terminal")
	out.Reset()
	spill := filepath.Join(dir, "flag-spill")
	code = Main(context.Background(), []string{"query", "--db", filepath.Join(dir, "s.duckdb"),
		"--memory-limit", "512MB", "--threads", "1", "--temp-directory", spill, "--format", "csv",
		"SELECT current_setting('memory_limit') AS m, current_setting('threads') AS t, current_setting('temp_directory') AS d"}, &out, &errOut)
	require.Equal(t, 0, code, errOut.String())
	require.Equal(t, "m,t,d\n488.2 MiB,1,"+spill+"\n", out.String())
}

// --quiet prints nothing but errors: no progress, no summary.
func TestRunQuiet(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	input, err := filepath.Abs("../../../fixtures/sample/occurrences-a.csv")
	require.NoError(t, err)
	var out, errOut bytes.Buffer
	code := Main(context.Background(), []string{"run", "../../../configs/sample.toml", "--quiet", "--db", filepath.Join(dir, "q.duckdb"), "--input", input}, &out, &errOut)
	require.Equal(t, 0, code, errOut.String())
	require.Empty(t, errOut.String())
	require.Empty(t, out.String())
	// --json still prints the result.
	out.Reset()
	code = Main(context.Background(), []string{"run", "../../../configs/sample.toml", "-q", "--json", "--db", filepath.Join(dir, "q.duckdb"), "--input", input}, &out, &errOut)
	require.Equal(t, 0, code, errOut.String())
	require.Contains(t, out.String(), `"decision":"skipped"`)
	// plan, export and rerun take it too.
	for _, args := range [][]string{
		{"plan", "../../../configs/sample.toml", "-q", "--db", filepath.Join(dir, "q.duckdb"), "--input", input},
		{"export", "../../../configs/sample.toml", "-q", "--db", filepath.Join(dir, "q.duckdb"), "--out", filepath.Join(dir, "out.csv")},
		{"rerun", "../../../configs/sample.toml", "-q", "--db", filepath.Join(dir, "q.duckdb")},
	} {
		out.Reset()
		code = Main(context.Background(), args, &out, &errOut)
		require.Equal(t, 0, code, "%s: %s", args[0], errOut.String())
		require.Empty(t, out.String(), args[0])
		require.Empty(t, errOut.String(), args[0])
	}
	require.FileExists(t, filepath.Join(dir, "out.csv"))
}
