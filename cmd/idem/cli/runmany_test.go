package cli

import (
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/idem-dev/idem/cmd/idem/cli/internal/clitest"
	"github.com/stretchr/testify/require"
)

// TestRunManyJSONKeepsCommittedRuns: a files-mode run whose second file
// cannot be read has committed the first; --json prints one object with
// that run and the error (decision failed, the error's exit code), as the
// human output prints the run and then the error.
func TestRunManyJSONKeepsCommittedRuns(t *testing.T) {
	t.Parallel()
	for _, form := range []string{"human", "json"} {
		t.Run(form, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			file := filepath.Join(dir, "trips.toml")
			clitest.WriteFile(t, file, filesJob(dir, "per_file"))
			landing(t, dir, "a.jsonl", 0, 3)
			clitest.WriteFile(t, filepath.Join(dir, "landing", "b.jsonl"), "{\"trip_id\": 9, \"fare\": \n")
			args := []string{"run", file}
			if form == "json" {
				args = append(args, "--json")
			}
			r := clitest.CallIdem(t, args...)
			require.Equal(t, 1, r.Code, r.Stdout+r.Stderr)
			require.Contains(t, r.Stderr, "b.jsonl")
			require.Equal(t, []string{"a.jsonl"}, clitest.QueryStrs(t, filepath.Join(dir, "test.duckdb"), `SELECT batch_id FROM idem.files ORDER BY path`))
			if form == "human" {
				require.Contains(t, r.Stdout, "trips: applied (first load)\n  batch     a.jsonl\n")
				return
			}
			var obj struct {
				Job      string   `json:"job"`
				Decision string   `json:"decision"`
				NewFiles []string `json:"new_files"`
				Runs     []struct {
					BatchID  string `json:"batch_id"`
					Decision string `json:"decision"`
					Snapshot int64  `json:"snapshot"`
				} `json:"runs"`
				Error    string `json:"error"`
				ExitCode int    `json:"exit_code"`
			}
			require.NoError(t, json.Unmarshal([]byte(r.Stdout), &obj), r.Stdout)
			require.Equal(t, "trips", obj.Job)
			require.Equal(t, "failed", obj.Decision)
			require.Len(t, obj.NewFiles, 2)
			require.Len(t, obj.Runs, 1)
			require.Equal(t, "a.jsonl", obj.Runs[0].BatchID)
			require.Equal(t, "applied", obj.Runs[0].Decision)
			require.Equal(t, int64(1), obj.Runs[0].Snapshot)
			require.Contains(t, obj.Error, "b.jsonl")
			require.Equal(t, 1, obj.ExitCode)
		})
	}
}
