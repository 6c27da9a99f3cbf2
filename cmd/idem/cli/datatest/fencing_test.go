package datatest

import (
	"fmt"
	"os"
	"testing"

	"github.com/idem-dev/idem/internal/report"

	"github.com/idem-dev/idem/cmd/idem/cli/internal/clitest"
	"github.com/stretchr/testify/require"
)

// With [job] fencing = "required", every writing command must carry the
// job's current --epoch: one without it, or with a stale one, is refused
// with exit 3 and changes nothing; with it, the command commits.
func TestFencingRequired(t *testing.T) {
	t.Parallel()
	j := clitest.NewGuardJob(t)
	j.Apply() // batch-1 before fencing is switched on: snapshot 1
	text, err := os.ReadFile(j.File)
	require.NoError(t, err)
	clitest.WriteText(t, j.File, string(text)+"\n[job]\nfencing = \"required\"\n")
	fence := clitest.CallIdem(t, "fence", j.File)
	require.Equal(t, 0, fence.Code, fence.Stderr)
	_, _, epoch := j.State()
	require.Greater(t, epoch, int64(1), "fence advanced the epoch")
	e := fmt.Sprint(epoch)

	batch2 := clitest.ChangesFixture(t, "batch-2.jsonl")
	missing := fmt.Sprintf(`job customer_state requires fencing ([job] fencing = "required"): pass --epoch %d`, epoch)
	stale := fmt.Sprintf("stale writer: epoch 0 is not the job's current epoch %d", epoch)
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"run without --epoch", []string{"run", j.File, "--input", batch2}, missing},
		{"run with a stale epoch", []string{"run", j.File, "--input", batch2, "--epoch", "0"}, stale},
		{"erase without --epoch", []string{"erase", j.File, "--key", "account-1"}, missing},
		{"erase with a stale epoch", []string{"erase", j.File, "--key", "account-1", "--epoch", "0"}, stale},
		{"erase with a stale parent", []string{"erase", j.File, "--key", "account-1", "--epoch", e, "--expect-parent", "0"}, "stale parent: expected 0, latest is 1"},
		{"rollback without --epoch", []string{"rollback", j.File, "--to-snapshot", "1"}, missing},
		{"rollback with a stale epoch", []string{"rollback", j.File, "--to-snapshot", "1", "--epoch", "0"}, stale},
	}
	for _, tc := range cases {
		before := clitest.CaptureState(t, j.DB)
		r := clitest.CallIdem(t, tc.args...)
		require.Equal(t, report.ExitRefused, r.Code, "%s: stdout %s stderr %s", tc.name, r.Stdout, r.Stderr)
		require.Contains(t, r.Stderr, tc.want, tc.name)
		require.Equal(t, before, clitest.CaptureState(t, j.DB), "%s changed the database", tc.name)
	}

	res := j.Apply("--input", batch2, "--epoch", e)
	require.Equal(t, report.DecisionApplied, res.Decision)
	require.Equal(t, int64(2), res.Snapshot)
	r := clitest.CallIdem(t, "erase", j.File, "--key", "account-1", "--epoch", e, "--expect-parent", "2")
	require.Equal(t, 0, r.Code, r.Stderr)
	r = clitest.CallIdem(t, "rollback", j.File, "--to-snapshot", "2", "--epoch", e, "--expect-parent", "3")
	require.Equal(t, 0, r.Code, r.Stderr)
	snapshot, _, _ := j.State()
	require.Equal(t, int64(4), snapshot)
	// A rebuild is no writer of the job: rerun is not fenced.
	r = clitest.CallIdem(t, "rerun", j.File)
	require.Equal(t, 0, r.Code, r.Stderr)
}

// Without [job] fencing (or with "optional"), --epoch stays optional; a
// value other than the two is a job-file error naming the key.
func TestFencingSetting(t *testing.T) {
	t.Parallel()
	j := clitest.NewGuardJob(t)
	text, err := os.ReadFile(j.File)
	require.NoError(t, err)
	clitest.WriteText(t, j.File, string(text)+"\n[job]\nfencing = \"optional\"\n")
	require.Equal(t, report.DecisionApplied, j.Apply().Decision)
	clitest.WriteText(t, j.File, string(text)+"\n[job]\nfencing = \"always\"\n")
	r := j.Run()
	require.Equal(t, report.ExitUsage, r.Code, r.Stderr)
	require.Contains(t, r.Stderr, `job.fencing: must be "optional" or "required" (got "always")`)
}
