package main

import (
	"fmt"
	"os"
	"testing"

	"github.com/idem-dev/idem/internal/job"

	"github.com/stretchr/testify/require"
)

// With [job] fencing = "required", every writing command must carry the
// job's current --epoch: one without it, or with a stale one, is refused
// with exit 3 and changes nothing; with it, the command commits.
func TestFencingRequired(t *testing.T) {
	t.Parallel()
	j := newGuardJob(t)
	j.apply() // batch-1 before fencing is switched on: snapshot 1
	text, err := os.ReadFile(j.file)
	require.NoError(t, err)
	writeText(t, j.file, string(text)+"\n[job]\nfencing = \"required\"\n")
	fence := callIdem(t, "fence", j.file)
	require.Equal(t, 0, fence.code, fence.stderr)
	_, _, epoch := j.state()
	require.Greater(t, epoch, int64(1), "fence advanced the epoch")
	e := fmt.Sprint(epoch)

	batch2 := changesFixture(t, "batch-2.jsonl")
	missing := fmt.Sprintf(`job customer_state requires fencing ([job] fencing = "required"): pass --epoch %d`, epoch)
	stale := fmt.Sprintf("stale writer: epoch 0 is not the job's current epoch %d", epoch)
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"run without --epoch", []string{"run", j.file, "--input", batch2}, missing},
		{"run with a stale epoch", []string{"run", j.file, "--input", batch2, "--epoch", "0"}, stale},
		{"erase without --epoch", []string{"erase", j.file, "--key", "account-1"}, missing},
		{"erase with a stale epoch", []string{"erase", j.file, "--key", "account-1", "--epoch", "0"}, stale},
		{"erase with a stale parent", []string{"erase", j.file, "--key", "account-1", "--epoch", e, "--expect-parent", "0"}, "stale parent: expected 0, latest is 1"},
		{"rollback without --epoch", []string{"rollback", j.file, "--to-snapshot", "1"}, missing},
		{"rollback with a stale epoch", []string{"rollback", j.file, "--to-snapshot", "1", "--epoch", "0"}, stale},
	}
	for _, tc := range cases {
		before := captureState(t, j.db)
		r := callIdem(t, tc.args...)
		require.Equal(t, job.ExitRefused, r.code, "%s: stdout %s stderr %s", tc.name, r.stdout, r.stderr)
		require.Contains(t, r.stderr, tc.want, tc.name)
		require.Equal(t, before, captureState(t, j.db), "%s changed the database", tc.name)
	}

	res := j.apply("--input", batch2, "--epoch", e)
	require.Equal(t, job.DecisionApplied, res.Decision)
	require.Equal(t, int64(2), res.Snapshot)
	r := callIdem(t, "erase", j.file, "--key", "account-1", "--epoch", e, "--expect-parent", "2")
	require.Equal(t, 0, r.code, r.stderr)
	r = callIdem(t, "rollback", j.file, "--to-snapshot", "2", "--epoch", e, "--expect-parent", "3")
	require.Equal(t, 0, r.code, r.stderr)
	snapshot, _, _ := j.state()
	require.Equal(t, int64(4), snapshot)
	// A rebuild is no writer of the job: rerun is not fenced.
	r = callIdem(t, "rerun", j.file)
	require.Equal(t, 0, r.code, r.stderr)
}

// Without [job] fencing (or with "optional"), --epoch stays optional; a
// value other than the two is a job-file error naming the key.
func TestFencingSetting(t *testing.T) {
	t.Parallel()
	j := newGuardJob(t)
	text, err := os.ReadFile(j.file)
	require.NoError(t, err)
	writeText(t, j.file, string(text)+"\n[job]\nfencing = \"optional\"\n")
	require.Equal(t, job.DecisionApplied, j.apply().Decision)
	writeText(t, j.file, string(text)+"\n[job]\nfencing = \"always\"\n")
	r := j.run()
	require.Equal(t, job.ExitUsage, r.code, r.stderr)
	require.Contains(t, r.stderr, `job.fencing: must be "optional" or "required" (got "always")`)
}
