package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/idem-dev/idem/internal/report"

	"github.com/idem-dev/idem/cmd/idem/cli/internal/clitest"
	"github.com/idem-dev/idem/internal/planner"
	"github.com/stretchr/testify/require"
)

// planThenRun plans args (a run's arguments after the job), requires that
// the plan changed nothing, then runs them, and requires the two to agree:
// the same decision in the same words, the same exit code, the same
// refusal text, and for a run that would write the job key the run uses.
func planThenRun(t *testing.T, db, jobFile string, args ...string) (planner.Plan, clitest.CLIResult) {
	t.Helper()
	before := clitest.CaptureState(t, db)
	p := clitest.CallIdem(t, append([]string{"plan", jobFile, "--json"}, args...)...)
	require.Equal(t, before, clitest.CaptureState(t, db), "plan %v changed the database", args)
	var plan planner.Plan
	require.NoError(t, json.Unmarshal([]byte(p.Stdout), &plan), "plan %v: %s %s", args, p.Stdout, p.Stderr)

	r := clitest.CallIdem(t, append([]string{"run", jobFile, "--json"}, args...)...)
	require.Equal(t, r.Code, p.Code, "plan %v exits as the run does: plan %s / run %s", args, p.Stderr, r.Stderr)
	if r.Code != 0 {
		require.Equal(t, report.DecisionRefused, plan.Decision, "plan %v: %s", args, p.Stdout)
		require.Equal(t, r.Stderr, p.Stderr, "plan %v gives the run's refusal", args)
		var e struct {
			Error    string `json:"error"`
			ExitCode int    `json:"exit_code"`
		}
		require.NoError(t, json.Unmarshal([]byte(r.Stdout), &e))
		require.Equal(t, e.Error, plan.Error)
		require.Equal(t, e.ExitCode, plan.ExitCode)
		return plan, r
	}
	var res struct {
		Decision string `json:"decision"`
		JobKey   string `json:"job_key"`
		Runs     []struct {
			Decision string `json:"decision"`
			JobKey   string `json:"job_key"`
		} `json:"runs"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.Stdout), &res), r.Stdout)
	require.Equal(t, res.Decision, plan.Decision, "plan %v decides as the run does", args)
	key := res.JobKey
	if len(res.Runs) > 0 {
		key = res.Runs[0].JobKey
	}
	if plan.Decision == report.DecisionApplied || plan.Decision == report.DecisionLoaded {
		require.Equal(t, key, plan.JobKey, "plan %v names the key the run uses", args)
	}
	return plan, r
}

// TestPlanAgreesWithRun: plan runs the run's own guards, so for every
// decision a run can take (first load, applied, already committed, a
// changed batch, a cursor gap, a stale epoch or parent, released SQL
// edited in place) plan says the same in the same words and exits alike.
func TestPlanAgreesWithRun(t *testing.T) {
	t.Parallel()
	j := clitest.NewGuardJob(t)
	batch2 := clitest.ChangesFixture(t, "batch-2.jsonl")
	changed := j.Input("batch-2.jsonl", `{"change_id":"x","entity_id":"e","source_version":1,"operation":"upsert","value":"v"}`)
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"first load", nil, report.DecisionApplied},
		{"the same batch again", nil, report.DecisionAlreadyCommitted},
		{"a new batch", []string{"--input", batch2}, report.DecisionApplied},
		{"the batch id with other content", []string{"--input", changed}, report.DecisionRefused},
		{"a stale parent", []string{"--input", clitest.ChangesFixture(t, "batch-3.jsonl"), "--expect-parent", "1"}, report.DecisionRefused},
		{"a stale epoch", []string{"--input", clitest.ChangesFixture(t, "batch-3.jsonl"), "--epoch", "7"}, report.DecisionRefused},
		{"a cursor gap", []string{"--input", clitest.ChangesFixture(t, "batch-3.jsonl"), "--from", "5", "--to", "9"}, report.DecisionRefused},
	}
	for _, tc := range cases {
		plan, _ := planThenRun(t, j.DB, j.File, tc.args...)
		require.Equal(t, tc.want, plan.Decision, tc.name)
	}
}

// TestPlanSeesEditedReleasedSQL is the new user's case: after editing an
// already-run transform file, plan said "would load (first load)" while the
// run refused with exit 3. Now both refuse, alike.
func TestPlanSeesEditedReleasedSQL(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "proj")
	r := clitest.CallIdem(t, "init", dir, "--pipeline", "events", "--mode", "refresh")
	require.Equal(t, 0, r.Code, r.Stderr)
	jobFile := filepath.Join(dir, "events.toml")
	db := filepath.Join(dir, "data", "events.duckdb")
	plan, _ := planThenRun(t, db, jobFile)
	require.Equal(t, report.DecisionLoaded, plan.Decision)
	require.True(t, plan.FirstLoad)
	plan, _ = planThenRun(t, db, jobFile)
	require.Equal(t, report.DecisionSkipped, plan.Decision)

	steps, err := filepath.Glob(filepath.Join(dir, "events", "transform", "v1", "*.sql"))
	require.NoError(t, err)
	require.NotEmpty(t, steps)
	text, err := os.ReadFile(steps[len(steps)-1])
	require.NoError(t, err)
	clitest.WriteFile(t, steps[len(steps)-1], string(text)+"\n-- edited after release\n")
	plan, r = planThenRun(t, db, jobFile)
	require.Equal(t, report.DecisionRefused, plan.Decision)
	require.Equal(t, report.ExitRefused, r.Code)
	require.Contains(t, plan.Reason, "was edited after release")
}

// TestPlanOfAFilesJob: with no new file plan says skipped, as the run does,
// and gives the job's key, not a key of no input; with new files it gives
// the first batch's key, which the run then uses; a committed file that
// changed is refused by both.
func TestPlanOfAFilesJob(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	jobFile := filepath.Join(dir, "trips.toml")
	clitest.WriteFile(t, jobFile, filesJob(dir, "per_file"))
	db := filepath.Join(dir, "test.duckdb")
	landing(t, dir, "a.jsonl", 0, 3)
	landing(t, dir, "b.jsonl", 3, 3)

	plan, _ := planThenRun(t, db, jobFile)
	require.Equal(t, report.DecisionApplied, plan.Decision)
	require.Len(t, plan.NewFiles, 2)

	plan, r := planThenRun(t, db, jobFile)
	require.Equal(t, report.DecisionSkipped, plan.Decision)
	require.Equal(t, "nothing new: no file that is not committed", plan.Reason)
	require.Empty(t, plan.Changed)
	key := clitest.QueryStrs(t, db, `SELECT job_key FROM idem.jobs WHERE job = 'trips'`)
	require.Equal(t, key, []string{plan.JobKey}, "the key the job holds, not one of no input")
	human := clitest.CallIdem(t, "plan", jobFile)
	require.Equal(t, 0, human.Code)
	require.Contains(t, human.Stdout, "trips: would be skipped: nothing new")
	_ = r

	landing(t, dir, "a.jsonl", 0, 4) // a committed file edited
	plan, _ = planThenRun(t, db, jobFile)
	require.Equal(t, report.DecisionRefused, plan.Decision)
	require.Contains(t, plan.Reason, "a.jsonl")
}
