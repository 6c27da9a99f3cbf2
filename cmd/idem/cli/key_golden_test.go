package cli

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/idem-dev/idem/cmd/idem/cli/internal/clitest"
	"github.com/stretchr/testify/require"
)

// TestExampleKeysGolden pins the job key `idem plan --json` reports for
// every example job in configs/ (a refresh pipeline with params, apply
// pipelines, merge_by_key in files mode and chunked, the sources of the
// configs/trips/ project) over the fixtures they read, with every key part.
// A change of the key's canonical JSON, of how a part is built from a job
// file or of how an input is hashed would reload every job on its next
// run: this test fails then with a diff of the parts (internal/job's
// TestKeyGolden pins each kind's parts; this pins the whole path through
// the CLI). Rewrite testdata/example-keys.golden only for a change meant to
// reload jobs: go test ./cmd/idem/cli -run TestExampleKeysGolden -update.
func TestExampleKeysGolden(t *testing.T) {
	t.Parallel()
	root, err := filepath.Abs("../../..")
	require.NoError(t, err)
	jobs := []string{
		"configs/sample.toml", "configs/versioned_changes.toml", "configs/orders.toml",
		"configs/trips.toml", "configs/trips_backfill.toml",
		"configs/trips/trips.toml", "configs/trips/zones.toml",
	}
	var got bytes.Buffer
	for _, j := range jobs {
		db := filepath.Join(t.TempDir(), "none.duckdb") // plan creates nothing
		code, stdout, stderr := clitest.InProcess(t, "plan", filepath.Join(root, j), "--db", db, "--json")
		require.Equal(t, 0, code, "plan %s: %s", j, stderr)
		var p struct {
			JobKey string          `json:"job_key"`
			Parts  json.RawMessage `json:"parts"`
		}
		require.NoError(t, json.Unmarshal([]byte(stdout), &p), stdout)
		require.Len(t, p.JobKey, 64, "plan %s reports a key", j)
		var parts bytes.Buffer
		require.NoError(t, json.Indent(&parts, p.Parts, "  ", "  "))
		got.WriteString(j + "\n  job_key " + p.JobKey + "\n  " + parts.String() + "\n")
		_, err := os.Stat(db)
		require.ErrorIs(t, err, os.ErrNotExist, "plan %s created the database", j)
	}
	golden := filepath.Join("testdata", "example-keys.golden")
	if *clitest.UpdateSnapshotGolden {
		require.NoError(t, os.WriteFile(golden, got.Bytes(), 0o644))
	}
	want, err := os.ReadFile(golden)
	require.NoError(t, err, "no golden file: run with -update")
	if string(want) != got.String() {
		t.Errorf("the example jobs' keys changed (every such job reloads on its next run):\n%s", clitest.FirstDiff(string(want), got.String()))
	}
	require.False(t, strings.Contains(got.String(), root), "a key part holds the repository's path: keys must not depend on where the files are")
}
