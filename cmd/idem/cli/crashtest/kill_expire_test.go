package crashtest

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/idem-dev/idem/cmd/idem/cli/internal/clitest"
	"github.com/stretchr/testify/require"
)

// TestKillExpire is the kill test of expiry. One database holds a refresh
// job (sample: loads A, B, C, A) and an apply job with [retention]
// keep_snapshots = 2 (three batches). Step 1 is `idem expire sample
// --keep-snapshots 1`, which also forgets the retained inputs of B and C;
// step 2 runs a fourth batch of the apply job, whose run expires one more
// snapshot after its commit. Each step is SIGKILLed at its fault points
// (and, for step 1, after random delays): the database must then hold the
// state before or after the step, or, for a kill between the run's COMMIT
// and its expiry, the committed run not yet expired, which the retry (the
// same command, already_committed) finishes. After the retry the state is
// that of one clean step and the store holds exactly the committed inputs.
//
// One random kill of step 1, 50 with IDEM_LONG=1 (IDEM_KILL_TRIALS=N sets
// the number).
func TestKillExpire(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("kill test runs idem as a subprocess; skipped with -short")
	}
	trials := clitest.KillTrials(t, 1, 50)
	dir := t.TempDir()
	sample := filepath.Join(dir, "sample.toml")
	vc := filepath.Join(dir, "vc.toml")
	root := clitest.RepoRoot(t)
	inA, inB := filepath.Join(root, "fixtures/sample/occurrences-a.csv"), filepath.Join(root, "fixtures/sample/occurrences-b.csv")
	a, err := os.ReadFile(inA)
	require.NoError(t, err)
	lines := strings.SplitAfter(string(a), "\n")
	inC := filepath.Join(dir, "occurrences-c.csv")
	clitest.WriteText(t, inC, strings.Join(lines[:len(lines)-2], ""))
	clitest.WriteText(t, sample, fmt.Sprintf(`name = "sample"
pipeline = "sample"
transform_version = 1
schema_version = 1
[input]
path = %q
format = "csv"
[target]
table = "occurrence_sample"
[params]
cap = 1000
licenses = ["CC0 1.0", "CC BY 4.0"]
`+clitest.DuckdbSection, inA))
	clitest.WriteText(t, vc, fmt.Sprintf(`name = "customer_state"
pipeline = "versioned_changes"
transform_version = 1
schema_version = 1
[input]
path = %q
[target]
table = "customer_state"
[retention]
keep_snapshots = 2
`+clitest.DuckdbSection, clitest.ChangesFixture(t, "batch-1.jsonl")))
	steps := [][]string{
		{"expire", sample, "--keep-snapshots", "1"},
		{"run", vc, "--input", clitest.ChangesFixture(t, "batch-4.jsonl")},
	}
	type point struct {
		name string
		post bool // the kill leaves the post-step state
		mid  bool // the kill leaves the run committed, its expiry not
	}
	points := [][]point{
		{{name: "expire_before_commit"}, {name: "expire_after_commit", post: true}, {name: "checkpoint", post: true}, {name: "after_checkpoint", post: true}},
		{{name: "after_commit", mid: true}, {name: "expire_before_commit", mid: true}, {name: "expire_after_commit", post: true}, {name: "checkpoint", post: true}},
	}

	base := filepath.Join(dir, "work")
	require.NoError(t, os.MkdirAll(base, 0o755))
	db := func(work string) string { return filepath.Join(work, "idem.duckdb") }
	for _, in := range []string{inA, inB, inC, inA} {
		r := clitest.CallIdem(t, "run", sample, "--db", db(base), "--input", in)
		require.Equal(t, 0, r.Code, r.Stderr)
	}
	for _, b := range []string{"batch-1", "batch-2", "batch-3"} {
		r := clitest.CallIdem(t, "run", vc, "--db", db(base), "--input", clitest.ChangesFixture(t, b+".jsonl"))
		require.Equal(t, 0, r.Code, r.Stderr)
	}
	var refs, dumps []string
	for k := 0; k <= len(steps); k++ {
		if k > 0 {
			r := clitest.CallIdem(t, append(steps[k-1], "--db", db(base), "--json")...)
			require.Equal(t, 0, r.Code, r.Stderr)
			if k == 1 {
				require.Contains(t, r.Stdout, `"oldest_kept":4`)
				require.Contains(t, r.Stdout, `"inputs":2`, "B and C are forgotten, A is named by snapshot 4")
			}
			if k == 2 {
				require.Contains(t, r.Stdout, `"expiry":{"oldest_kept":3,"expired":1}`)
			}
		}
		ref := filepath.Join(dir, "refs", strconv.Itoa(k))
		clitest.CopyDir(t, base, ref)
		refs = append(refs, ref)
		dumps = append(dumps, clitest.DumpState(t, db(ref)))
	}
	var took clitest.Once[time.Duration] // step 1 in a process of its own
	tookExpire := func(t *testing.T) time.Duration {
		return took.Get(t, func(t *testing.T) time.Duration {
			work := filepath.Join(t.TempDir(), "db")
			clitest.CopyDir(t, refs[0], work)
			start := time.Now()
			r := clitest.KillCLI(t, work, "", 0, append(steps[0], "--db", db(work), "--json")...)
			require.Equal(t, 0, r.Code, r.Stderr)
			return time.Since(start)
		})
	}
	require.Len(t, clitest.StoreFiles(t, db(refs[0])), 3+3, "A, B, C and three batches")
	require.Len(t, clitest.StoreFiles(t, db(refs[1])), 1+3, "A and three batches")
	// The kept snapshot of the refresh job is still rebuilt from its
	// inputs; an expired one is refused.
	probe := filepath.Join(dir, "probe")
	clitest.CopyDir(t, refs[1], probe)
	r := clitest.CallIdem(t, "rerun", sample, "--db", db(probe), "--json")
	require.Equal(t, 0, r.Code, r.Stderr)
	require.Contains(t, r.Stdout, `"reproduced":true`)
	r = clitest.CallIdem(t, "rerun", sample, "--db", db(probe), "--snapshot", "3")
	require.Equal(t, 3, r.Code, r.Stderr)
	require.Contains(t, r.Stderr, "snapshot 3 of sample expired (oldest kept: 4)")

	check := func(t *testing.T, k int, work string, r clitest.CLIResult, fp point, how string) {
		t.Helper()
		if r.Killed {
			got := crashedState(t, work, refs[k], dumps[k])
			switch {
			case got == dumps[k] && !fp.post && !fp.mid:
			case got == dumps[k+1]:
			case fp.mid && got != dumps[k]:
				// The batch committed and its expiry did not: the
				// retry below, already_committed, expires.
			default:
				require.Failf(t, "mixed state", "%s: neither the pre- nor the post-step state: %s", how, clitest.FirstDiff(dumps[k], got))
			}
			q := clitest.CallIdem(t, "query", "--db", db(work), "SELECT count(*) FROM idem.snapshots")
			require.Equal(t, 0, q.Code, "%s: query after the kill: %s", how, q.Stderr)
			clitest.RequireStoreIsCommitted(t, db(work))
			retry := clitest.CallIdem(t, append(steps[k], "--db", db(work), "--json")...)
			require.Equal(t, 0, retry.Code, "%s: retry: %s", how, retry.Stderr)
		} else {
			require.Equal(t, 0, r.Code, "%s: %s", how, r.Stderr)
		}
		require.Equal(t, dumps[k+1], clitest.DumpState(t, db(work)), "%s: not the state of one clean step", how)
		clitest.RequireStoreIsCommitted(t, db(work))
	}
	t.Run("fault_points", func(t *testing.T) {
		for k := range steps {
			for _, fp := range points[k] {
				t.Run(fmt.Sprintf("step%d/%s", k+1, fp.name), func(t *testing.T) {
					t.Parallel()
					work := filepath.Join(t.TempDir(), "db")
					clitest.CopyDir(t, refs[k], work)
					r := clitest.KillCLI(t, work, fp.name, 0, append(steps[k], "--db", db(work), "--json")...)
					require.True(t, r.Killed, "IDEM_FAULT=%s: not killed (exit %d): %s", fp.name, r.Code, r.Stderr)
					check(t, k, work, r, fp, "IDEM_FAULT="+fp.name)
				})
			}
		}
	})
	t.Run("random_kills", func(t *testing.T) {
		rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 16))
		for i := range trials {
			seed := rng.Uint64()
			t.Run(fmt.Sprintf("trial%d", i), func(t *testing.T) {
				t.Parallel()
				delay := time.Duration(rand.New(rand.NewPCG(seed, 2)).Int64N(int64(tookExpire(t)) + 1))
				work := filepath.Join(t.TempDir(), "db")
				clitest.CopyDir(t, refs[0], work)
				r := clitest.KillCLI(t, work, "", delay, append(steps[0], "--db", db(work), "--json")...)
				check(t, 0, work, r, point{}, fmt.Sprintf("trial %d (kill after %s)", i, delay))
			})
		}
	})
}
