package crashtest

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/idem-dev/idem/cmd/idem/cli/internal/clitest"
	"github.com/stretchr/testify/require"
)

// TestKillUnsettledProjectRun is the kill test of the checkpoint policy
// (internal/run/settle.go): a project run leaves each job's commit in the
// WAL and checkpoints them all once, when it closes the database at its
// end. Killed before that checkpoint (every commit in the WAL only),
// while it runs, or once it returned, the database then holds every job
// committed, as one clean run leaves it; the project run again finds each
// job committed (skipped, already_committed) and leaves no WAL.
func TestKillUnsettledProjectRun(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("kill test runs idem as a subprocess; skipped with -short")
	}
	p := chainProject(t)
	db := func(dir string) string { return filepath.Join(dir, "data", "p.duckdb") }
	ref := t.TempDir()
	clitest.CopyDir(t, p.Dir, ref)
	r := clitest.KillCLI(t, ref, "", 0, "run", ref)
	require.Equal(t, 0, r.Code, r.Stderr)
	require.NoFileExists(t, db(ref)+".wal", "a clean project run leaves no WAL")
	after := clitest.DumpState(t, db(ref))

	cases := []struct {
		name string
		kill func(t *testing.T, work string) clitest.CLIResult
	}{
		{"before_settle", func(t *testing.T, work string) clitest.CLIResult {
			// Held just before the checkpoint: the four jobs committed,
			// in the WAL only.
			b := clitest.StartBlocked(t, work, "settle", "run", work)
			st, err := os.Stat(db(work) + ".wal")
			require.NoError(t, err, "the commits are in the WAL while the run is held")
			require.Positive(t, st.Size())
			require.NoError(t, b.Cmd.Process.Kill())
			select {
			case <-b.Done:
			case <-time.After(time.Minute):
				t.Fatal("the killed run did not exit")
			}
			return clitest.CLIResult{Killed: true}
		}},
		{"settle", func(t *testing.T, work string) clitest.CLIResult {
			return clitest.KillCLI(t, work, "settle", 0, "run", work)
		}},
		{"after_settle", func(t *testing.T, work string) clitest.CLIResult {
			return clitest.KillCLI(t, work, "after_settle", 0, "run", work)
		}},
		// A kill at the first job's after_checkpoint: its commit is in
		// the WAL, the other jobs never ran.
		{"after_checkpoint", nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			work := t.TempDir()
			clitest.CopyDir(t, p.Dir, work)
			if tc.kill == nil {
				r := clitest.KillCLI(t, work, tc.name, 0, "run", work)
				require.True(t, r.Killed, "IDEM_FAULT=%s: not killed (exit %d): %s", tc.name, r.Code, r.Stderr)
				require.FileExists(t, db(work)+".wal", "the first job's commit is in the WAL")
				retry := clitest.KillCLI(t, work, "", 0, "run", work)
				require.Equal(t, 0, retry.Code, retry.Stderr)
				require.Equal(t, after, clitest.DumpState(t, db(work)), "the project run finished after the kill")
				require.NoFileExists(t, db(work)+".wal")
				return
			}
			r := tc.kill(t, work)
			require.True(t, r.Killed, "%s: not killed (exit %d): %s", tc.name, r.Code, r.Stderr)
			got := clitest.DumpState(t, db(work))
			require.True(t, got == after, "after a kill at %s the database does not hold every job committed: %s", tc.name, clitest.FirstDiff(after, got))
			retry := clitest.KillCLI(t, work, "", 0, "run", work, "--json")
			require.Equal(t, 0, retry.Code, retry.Stderr)
			var res []struct{ Job, Decision string }
			require.NoError(t, json.Unmarshal([]byte(retry.Stdout), &res), retry.Stdout)
			require.Len(t, res, 4)
			for _, j := range res {
				require.Contains(t, []string{"skipped", "already_committed"}, j.Decision, "%s after a kill at %s", j.Job, tc.name)
			}
			require.Equal(t, after, clitest.DumpState(t, db(work)))
			require.NoFileExists(t, db(work)+".wal")
		})
	}
}

// chainProject is clitest.NewProject with two models: mid, a file model
// over src, and top over mid.
func chainProject(t *testing.T) *clitest.Project {
	t.Helper()
	p := clitest.NewProject(t)
	p.FileModel("mid", "p", []string{"src"}, []string{"id"}, "SELECT id, zone, amount FROM {{upstream:src}} WHERE amount > 6\n")
	p.Model("top", "p", []string{"mid"}, []string{"zone"}, "", "SELECT zone, sum(amount) AS total FROM {{upstream:mid}} GROUP BY zone")
	return p
}
