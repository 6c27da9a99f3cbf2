package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idem-dev/idem/cmd/idem/cli/internal/clitest"
	"github.com/idem-dev/idem/internal/report"
)

// TestJobFileBoundsAndReservedNames: the CLI wiring of internal/job's
// refusals at load (unit-tested there). A job file nested 100,000 deep or
// over 1 MiB, and a target named like a temp table of the run, are usage
// errors (exit 2) naming the file, line and key, given at once, and the
// database a run would write is left exactly as it was. A project folder
// holding such a file is refused the same way.
func TestJobFileBoundsAndReservedNames(t *testing.T) {
	t.Parallel()
	root, err := filepath.Abs("../../..")
	require.NoError(t, err)
	dir := t.TempDir()
	db := filepath.Join(dir, "state.duckdb")
	sample := func(extra string) string {
		return `name = "occ"
pipeline = "sample"
transform_version = 1
schema_version = 1
[input]
path = "` + filepath.Join(root, "fixtures", "sample", "occurrences-a.csv") + `"
[duckdb]
threads = 1
` + extra
	}
	// A database with one committed job, to prove nothing changes.
	clitest.WriteFile(t, filepath.Join(dir, "ok", "ok.toml"), sample("[target]\ntable = \"occ\"\n"))
	code, _, stderr := clitest.InProcess(t, "run", filepath.Join(dir, "ok", "ok.toml"), "--db", db, "--quiet")
	require.Equal(t, 0, code, stderr)
	before := clitest.CaptureState(t, db)

	deep := sample("[params]\ncap = " + strings.Repeat("[", 100_000) + strings.Repeat("]", 100_000) + "\n")
	cases := []struct {
		name, file, text string
		want             []string
	}{
		{"deep", "deep.toml", deep, []string{"deep.toml:10", "nest deeper than 32 levels"}},
		{"large", "large.toml", sample("# " + strings.Repeat("x", 1<<20) + "\n"), []string{"large.toml", "larger than 1048576 bytes"}},
		{"reserved target", "staged.toml", sample("[target]\ntable = \"staged\"\n"), []string{"staged.toml:10", `target.table: table "staged" is reserved`}},
		{"reserved name", "outcomes.toml", strings.Replace(sample(""), `name = "occ"`, `name = "Outcomes"`, 1), []string{"outcomes.toml:1", `name: table "Outcomes" is reserved`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			path := filepath.Join(t.TempDir(), tc.file)
			clitest.WriteFile(t, path, tc.text)
			for _, args := range [][]string{
				{"run", path, "--db", db},
				{"plan", path, "--db", db},
				{"lint", path},
				{"run", filepath.Dir(path), "--db", db}, // a project folder
			} {
				start := time.Now()
				code, _, stderr := clitest.InProcess(t, args...)
				require.Equal(t, report.ExitUsage, code, "%v: %s", args, stderr)
				for _, w := range tc.want {
					require.Contains(t, stderr, w, "%v", args)
				}
				require.Less(t, time.Since(start), 20*time.Second, "%v: refused before decoding, not after", args)
			}
		})
	}
	t.Cleanup(func() {
		require.Equal(t, before, clitest.CaptureState(t, db), "a refused job file changed the database")
		_, err := os.Stat(filepath.Join(dir, "ok"))
		require.NoError(t, err)
	})
}
