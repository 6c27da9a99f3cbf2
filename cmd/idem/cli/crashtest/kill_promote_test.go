package crashtest

import (
	"path/filepath"
	"testing"

	"github.com/idem-dev/idem/cmd/idem/cli/internal/clitest"
	"github.com/stretchr/testify/require"
)

// TestKillPromote is the kill test of idem promote: environment dev
// rebuilt mid and top of src → mid → top after mid's model was edited;
// promote commits mid, then top, into production. It is SIGKILLed at each
// fault point of each job: both commit in one transaction, so production
// then holds the state before the promote or after it, never one job
// promoted without the other; running promote again finishes it (or says
// already_promoted), and the result is the state of one clean promote.
func TestKillPromote(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("kill test runs idem as a subprocess; skipped with -short")
	}
	p := chainProject(t) // kill_settle_test.go
	require.Equal(t, 0, p.Idem("run", p.Dir).Code)
	p.Write("models/mid.sql", "SELECT id, zone, amount * 2 AS amount FROM {{upstream:src}}\n")
	r := p.Idem("run", p.Dir, "--env", "dev")
	require.Equal(t, 0, r.Code, r.Stderr)

	db := func(dir string) string { return filepath.Join(dir, "data", "p.duckdb") }
	base := p.Dir
	before := clitest.DumpState(t, db(base))
	ref := t.TempDir()
	clitest.CopyDir(t, base, ref)
	r = clitest.KillCLI(t, ref, "", 0, "promote", ref, "--env", "dev")
	require.Equal(t, 0, r.Code, r.Stderr)
	after := clitest.DumpState(t, db(ref))

	// mid's phases run first, then top's, in one transaction: the commit's
	// points are passed by the last job, top.
	for _, point := range []string{"mid:after_target", "top:after_target", "top:before_commit", "top:after_commit", "top:checkpoint", "top:after_checkpoint"} {
		t.Run(point, func(t *testing.T) {
			t.Parallel()
			work := t.TempDir()
			clitest.CopyDir(t, base, work)
			r := clitest.KillCLI(t, work, point, 0, "promote", work, "--env", "dev")
			require.True(t, r.Killed, "IDEM_FAULT=%s: not killed (exit %d): %s", point, r.Code, r.Stderr)
			committed := point == "top:after_commit" || point == "top:checkpoint" || point == "top:after_checkpoint"
			got := clitest.DumpState(t, db(work))
			switch {
			case got == before && !committed:
			case got == after && committed:
			default:
				require.Failf(t, "torn promote", "IDEM_FAULT=%s: neither the state before the promote nor after it: %s", point, clitest.FirstDiff(before, got))
			}
			retry := clitest.KillCLI(t, work, "", 0, "promote", work, "--env", "dev")
			require.Equal(t, 0, retry.Code, "retry after IDEM_FAULT=%s: %s", point, retry.Stderr)
			want := "promoted: snapshot 2"
			if committed {
				want = "already promoted: snapshot 2"
			}
			require.Contains(t, retry.Stdout, "mid: "+want)
			require.Contains(t, retry.Stdout, "top: "+want)
			require.Equal(t, after, clitest.DumpState(t, db(work)), "IDEM_FAULT=%s: not the state of one clean promote", point)
			clitest.RequireStoreIsCommitted(t, db(work))
		})
	}
}
