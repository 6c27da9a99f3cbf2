package guardtest

import (
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/idem-dev/idem/internal/report"

	"github.com/idem-dev/idem/cmd/idem/cli/internal/clitest"
	"github.com/idem-dev/idem/internal/history"
	"github.com/idem-dev/idem/internal/planner"
	"github.com/stretchr/testify/require"
)

// TestChangedTargetIsRefused: when the state row says the target holds
// snapshot S but the table was dropped or its rows changed by hand, every
// run is refused (exit 3, nothing written) with the repair in the message,
// and the repair, a rollback to S, works: the next run commits and a rerun
// reproduces the snapshot.
func TestChangedTargetIsRefused(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, change, want string
	}{
		{"dropped", "DROP TABLE " + clitest.ApplyTable, `table "customer_state" of job "customer_state" is missing, but the job's state says it holds snapshot 2 (`},
		{"rows deleted", "DELETE FROM " + clitest.ApplyTable + " WHERE entity_id IN (SELECT min(entity_id) FROM " + clitest.ApplyTable + ")", `table "customer_state" of job "customer_state" holds `},
	} {
		t.Run(tc.name, func(t *testing.T) {
			j := clitest.NewGuardJob(t)
			j.Apply("--input", clitest.ChangesFixture(t, "batch-1.jsonl"))
			second := j.Apply("--input", clitest.ChangesFixture(t, "batch-2.jsonl"))
			require.Equal(t, int64(2), second.Snapshot)
			rows := j.Query("SELECT * FROM " + clitest.ApplyTable + " ORDER BY ALL")
			require.NotEmpty(t, rows)
			clitest.ExecSQL(t, j.DB, tc.change)

			// A retry of a committed batch and a new batch are both refused.
			for _, batch := range []string{"batch-2.jsonl", "batch-3.jsonl"} {
				msg := j.Refused("--input", clitest.ChangesFixture(t, batch))
				require.Contains(t, msg, tc.want)
				require.Contains(t, msg, "nothing was changed; repair with `idem rollback "+j.File+" --to-snapshot 2`")
			}

			r := clitest.CallIdem(t, "plan", j.File, "--input", clitest.ChangesFixture(t, "batch-3.jsonl"), "--json")
			require.Equal(t, report.ExitRefused, r.Code, "plan exits as the run would: %s", r.Stderr)
			var plan planner.Plan
			require.NoError(t, json.Unmarshal([]byte(r.Stdout), &plan), r.Stdout)
			require.Equal(t, report.DecisionRefused, plan.Decision)
			require.Contains(t, plan.Reason, tc.want)

			r = clitest.CallIdem(t, "rollback", j.File, "--to-snapshot", "2")
			require.Equal(t, 0, r.Code, r.Stderr)
			require.Equal(t, rows, j.Query("SELECT * FROM "+clitest.ApplyTable+" ORDER BY ALL"), "the rollback rebuilt the rows of snapshot 2")
			third := j.Apply("--input", clitest.ChangesFixture(t, "batch-3.jsonl"))
			require.Equal(t, report.DecisionApplied, third.Decision)
			require.Equal(t, int64(4), third.Snapshot)
			r = clitest.CallIdem(t, "rerun", j.File, "--json")
			require.Equal(t, 0, r.Code, r.Stdout+r.Stderr)
			var rr history.RerunResult
			require.NoError(t, json.Unmarshal([]byte(r.Stdout), &rr))
			require.True(t, rr.Reproduced)
		})
	}
}

// TestDroppedRefreshTargetIsRefused: a refresh job whose target was dropped
// is refused too, whether the run would skip (same key) or reload; the
// rollback rebuilds the target and keeps the outcomes table its schema DDL
// would replace.
func TestDroppedRefreshTargetIsRefused(t *testing.T) {
	t.Parallel()
	root := clitest.RepoRoot(t)
	db := filepath.Join(t.TempDir(), "idem.duckdb")
	cfg := filepath.Join(root, "configs", "sample.toml")
	code, _, errOut := clitest.InProcess(t, "run", cfg, "--db", db)
	require.Equal(t, 0, code, errOut)
	const target = "occurrence_sample"
	rows := clitest.QueryInts(t, db, "SELECT id FROM "+target+" ORDER BY id")
	outcomes := clitest.QueryInts(t, db, "SELECT count(*) FROM "+target+"_outcomes")
	require.NotEmpty(t, rows)
	clitest.ExecSQL(t, db, "DROP TABLE "+target)

	for _, args := range [][]string{
		{"run", cfg, "--db", db},
		{"run", cfg, "--db", db, "--input", filepath.Join(root, "fixtures", "sample", "occurrences-b.csv")},
	} {
		before := clitest.CaptureState(t, db)
		code, _, errOut = clitest.InProcess(t, args...)
		require.Equal(t, report.ExitRefused, code, errOut)
		require.Contains(t, errOut, `table "occurrence_sample" of job "sample" is missing, but the job's state says it holds snapshot 1`)
		require.Contains(t, errOut, "--to-snapshot 1")
		require.Equal(t, before, clitest.CaptureState(t, db))
	}

	code, _, errOut = clitest.InProcess(t, "rollback", cfg, "--db", db, "--to-snapshot", "1")
	require.Equal(t, 0, code, errOut)
	require.Equal(t, rows, clitest.QueryInts(t, db, "SELECT id FROM "+target+" ORDER BY id"))
	require.Equal(t, outcomes, clitest.QueryInts(t, db, "SELECT count(*) FROM "+target+"_outcomes"))
	code, out, errOut := clitest.InProcess(t, "run", cfg, "--db", db, "--json")
	require.Equal(t, 0, code, errOut)
	require.Equal(t, []string{report.DecisionSkipped}, clitest.JSONDecisions(t, out))
}
