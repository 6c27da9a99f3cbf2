package run_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/idem-dev/idem/internal/report"
	"github.com/idem-dev/idem/internal/run"

	"github.com/stretchr/testify/require"

	"github.com/idem-dev/idem/internal/history"
	"github.com/idem-dev/idem/pipelines"
)

// A run canceled while it hashes the input, copies it into the store or
// runs a step returns ErrCanceled (exit 1, "nothing was committed"), leaves
// no job state, ledger row or retained copy behind, and the run log still
// records it, as every run of a job that opened its database.
func TestCancelRollsBack(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		bytes string // cancel when a Bytes label starts with this
		step  string // cancel when this step starts
	}{
		{name: "while hashing", bytes: "hash "},
		{name: "while copying", bytes: "retain "},
		{name: "in a step", step: "03_outcomes"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			dbPath := filepath.Join(dir, "idem.duckdb")
			input, err := filepath.Abs(filepath.Join("../..", "fixtures", "changes", "batch-1.jsonl"))
			require.NoError(t, err)
			jobPath := filepath.Join(dir, "job.toml")
			require.NoError(t, os.WriteFile(jobPath, []byte(fmt.Sprintf(`name = "customer_state"
pipeline = "versioned_changes"
transform_version = 1
schema_version = 1
database = %q

[input]
path = %q
`, dbPath, input)), 0o644))
			j, err := run.LoadJob(jobPath, pipelines.FS)
			require.NoError(t, err)

			// The database is opened with the context that gets canceled,
			// as the CLI does.
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			db, err := run.Open(ctx, dbPath, run.OpenOptions{})
			require.NoError(t, err)
			defer db.Close()

			var progress report.Progress
			if tc.bytes != "" {
				progress.Bytes = func(label string, done, total int64) {
					if strings.HasPrefix(label, tc.bytes) {
						cancel()
					}
				}
			}
			if tc.step != "" {
				progress.Step = func(name string) func(time.Duration) {
					if name == tc.step {
						cancel()
					}
					return nil
				}
			}
			_, err = db.Run(ctx, j, run.RunOptions{Progress: progress})
			require.ErrorIs(t, err, report.ErrCanceled)
			require.ErrorIs(t, err, context.Canceled)
			require.Equal(t, report.ExitFailure, report.ExitCode(err))
			require.Contains(t, err.Error(), "nothing was committed")

			check := context.Background()
			for _, table := range []string{"idem.jobs", "idem.ledger", "idem.snapshots", "idem.inputs"} {
				rows, err := db.Query(check, "SELECT count(*) FROM "+table)
				require.NoError(t, err)
				require.Equal(t, int64(0), rows.Values[0][0], table)
			}
			rows, err := db.Query(check, "SELECT count(*) FROM duckdb_tables() WHERE table_name LIKE 'customer_state%'")
			require.NoError(t, err)
			require.Equal(t, int64(0), rows.Values[0][0], "the target was created")
			if tc.bytes != "" {
				var left []string
				_ = filepath.Walk(dbPath+".inputs", func(p string, info os.FileInfo, err error) error {
					if err == nil && !info.IsDir() {
						left = append(left, p)
					}
					return nil
				})
				require.Empty(t, left, "an interrupted copy left files in the store")
			}

			entries, err := history.Log(check, db, "customer_state")
			require.NoError(t, err)
			require.Len(t, entries, 1)
			require.Equal(t, report.DecisionFailed, entries[0].Decision)
			require.Contains(t, *entries[0].Message, "nothing was committed")

			// The same database serves the retry.
			res, err := db.Run(check, j, run.RunOptions{})
			require.NoError(t, err)
			require.Equal(t, report.DecisionApplied, res.Decision)
		})
	}
}
