package guardtest

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idem-dev/idem/cmd/idem/cli/internal/clitest"
	"github.com/idem-dev/idem/internal/planner"
	"github.com/idem-dev/idem/internal/report"
)

// TestJobIdentity: a second job file that names a job the database holds
// (another project sharing the database) with another pipeline or another
// target table is refused by run, plan, rollback, expire and erase, exit
// 3, naming both pipelines and tables, with every table unchanged; the job
// of the database still runs. A job file of the same pipeline and target is the same job.
func TestJobIdentity(t *testing.T) {
	t.Parallel()
	sample := filepath.Join(clitest.RepoRoot(t), "fixtures", "sample", "occurrences-a.csv")
	for _, tc := range []struct {
		name, pipeline, table, input, want string
	}{
		{"another pipeline", "sample", clitest.ApplyTable, sample,
			"job customer_state in this database is pipeline versioned_changes into table customer_state (snapshot 1), but %s is pipeline sample into table customer_state: two jobs share the name customer_state"},
		{"another target", "versioned_changes", "customer_state_b", "",
			"job customer_state in this database is pipeline versioned_changes into table customer_state (snapshot 1), but %s is pipeline versioned_changes into table customer_state_b: two jobs share the name customer_state"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			j := clitest.AppliedGuardJob(t)
			other := filepath.Join(t.TempDir(), "other.toml")
			input := tc.input
			if input == "" {
				input = clitest.ChangesFixture(t, "batch-2.jsonl")
			}
			clitest.WriteText(t, other, fmt.Sprintf(`name = %q
pipeline = %q
transform_version = 1
schema_version = 1
database = %q

[input]
path = %q

[target]
table = %q
`+clitest.DuckdbSection, clitest.ApplyJobName, tc.pipeline, j.DB, input, tc.table))
			want := fmt.Sprintf(tc.want, other)

			before := clitest.CaptureState(t, j.DB)
			r := clitest.CallIdem(t, "run", other)
			require.Equal(t, report.ExitRefused, r.Code, r.Stdout+r.Stderr)
			require.Contains(t, r.Stderr, want)
			require.Equal(t, before, clitest.CaptureState(t, j.DB), "a refused run changed the database")

			r = clitest.CallIdem(t, "plan", other, "--json")
			require.Equal(t, report.ExitRefused, r.Code, r.Stderr)
			var plan planner.Plan
			require.NoError(t, json.Unmarshal([]byte(r.Stdout), &plan), r.Stdout)
			require.Equal(t, report.DecisionRefused, plan.Decision)
			require.Contains(t, plan.Reason, want)
			require.Equal(t, before, clitest.CaptureState(t, j.DB))

			// The other writers refuse it too (erase where the pipeline
			// has the erase's key and position, as versioned_changes does).
			writers := [][]string{{"rollback", other, "--to-snapshot", "1"}, {"expire", other, "--keep-snapshots", "1"}}
			if tc.pipeline == "versioned_changes" {
				writers = append(writers, []string{"erase", other, "--key", "entity-1"})
			}
			for _, args := range writers {
				r = clitest.CallIdem(t, args...)
				require.Equal(t, report.ExitRefused, r.Code, "%v: %s", args, r.Stdout+r.Stderr)
				require.Contains(t, r.Stderr, want)
			}
			require.Equal(t, before, clitest.CaptureState(t, j.DB))

			// The job the database holds goes on.
			res := j.Apply("--input", clitest.ChangesFixture(t, "batch-2.jsonl"))
			require.Equal(t, report.DecisionApplied, res.Decision)
		})
	}
}
