package main

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

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
	trials := killTrials(t, 1, 50)
	dir := t.TempDir()
	sample := filepath.Join(dir, "sample.toml")
	vc := filepath.Join(dir, "vc.toml")
	abs := func(p string) string {
		a, err := filepath.Abs(p)
		require.NoError(t, err)
		return a
	}
	inA, inB := abs("../../fixtures/sample/occurrences-a.csv"), abs("../../fixtures/sample/occurrences-b.csv")
	a, err := os.ReadFile(inA)
	require.NoError(t, err)
	lines := strings.SplitAfter(string(a), "\n")
	inC := filepath.Join(dir, "occurrences-c.csv")
	writeText(t, inC, strings.Join(lines[:len(lines)-2], ""))
	writeText(t, sample, fmt.Sprintf(`name = "sample"
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
`+duckdbSection, inA))
	writeText(t, vc, fmt.Sprintf(`name = "customer_state"
pipeline = "versioned_changes"
transform_version = 1
schema_version = 1
[input]
path = %q
[target]
table = "customer_state"
[retention]
keep_snapshots = 2
`+duckdbSection, changesFixture(t, "batch-1.jsonl")))
	steps := [][]string{
		{"expire", sample, "--keep-snapshots", "1"},
		{"run", vc, "--input", changesFixture(t, "batch-4.jsonl")},
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
		r := callIdem(t, "run", sample, "--db", db(base), "--input", in)
		require.Equal(t, 0, r.code, r.stderr)
	}
	for _, b := range []string{"batch-1", "batch-2", "batch-3"} {
		r := callIdem(t, "run", vc, "--db", db(base), "--input", changesFixture(t, b+".jsonl"))
		require.Equal(t, 0, r.code, r.stderr)
	}
	var refs, dumps []string
	for k := 0; k <= len(steps); k++ {
		if k > 0 {
			r := callIdem(t, append(steps[k-1], "--db", db(base), "--json")...)
			require.Equal(t, 0, r.code, r.stderr)
			if k == 1 {
				require.Contains(t, r.stdout, `"oldest_kept":4`)
				require.Contains(t, r.stdout, `"inputs":2`, "B and C are forgotten, A is named by snapshot 4")
			}
			if k == 2 {
				require.Contains(t, r.stdout, `"expiry":{"oldest_kept":3,"expired":1}`)
			}
		}
		ref := filepath.Join(dir, "refs", strconv.Itoa(k))
		copyDir(t, base, ref)
		refs = append(refs, ref)
		dumps = append(dumps, dumpState(t, db(ref)))
	}
	var took once[time.Duration] // step 1 in a process of its own
	tookExpire := func(t *testing.T) time.Duration {
		return took.get(t, func(t *testing.T) time.Duration {
			work := filepath.Join(t.TempDir(), "db")
			copyDir(t, refs[0], work)
			start := time.Now()
			r := killCLI(t, work, "", 0, append(steps[0], "--db", db(work), "--json")...)
			require.Equal(t, 0, r.code, r.stderr)
			return time.Since(start)
		})
	}
	require.Len(t, storeFiles(t, db(refs[0])), 3+3, "A, B, C and three batches")
	require.Len(t, storeFiles(t, db(refs[1])), 1+3, "A and three batches")
	// The kept snapshot of the refresh job is still rebuilt from its
	// inputs; an expired one is refused.
	probe := filepath.Join(dir, "probe")
	copyDir(t, refs[1], probe)
	r := callIdem(t, "rerun", sample, "--db", db(probe), "--json")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, `"reproduced":true`)
	r = callIdem(t, "rerun", sample, "--db", db(probe), "--snapshot", "3")
	require.Equal(t, 3, r.code, r.stderr)
	require.Contains(t, r.stderr, "snapshot 3 of sample expired (oldest kept: 4)")

	check := func(t *testing.T, k int, work string, r cliResult, fp point, how string) {
		t.Helper()
		if r.killed {
			got := crashedState(t, work, refs[k], dumps[k])
			switch {
			case got == dumps[k] && !fp.post && !fp.mid:
			case got == dumps[k+1]:
			case fp.mid && got != dumps[k]:
				// The batch committed and its expiry did not: the
				// retry below, already_committed, expires.
			default:
				require.Failf(t, "mixed state", "%s: neither the pre- nor the post-step state: %s", how, firstDiff(dumps[k], got))
			}
			q := callIdem(t, "query", "--db", db(work), "SELECT count(*) FROM idem.snapshots")
			require.Equal(t, 0, q.code, "%s: query after the kill: %s", how, q.stderr)
			requireStoreIsCommitted(t, db(work))
			retry := callIdem(t, append(steps[k], "--db", db(work), "--json")...)
			require.Equal(t, 0, retry.code, "%s: retry: %s", how, retry.stderr)
		} else {
			require.Equal(t, 0, r.code, "%s: %s", how, r.stderr)
		}
		require.Equal(t, dumps[k+1], dumpState(t, db(work)), "%s: not the state of one clean step", how)
		requireStoreIsCommitted(t, db(work))
	}
	t.Run("fault_points", func(t *testing.T) {
		for k := range steps {
			for _, fp := range points[k] {
				t.Run(fmt.Sprintf("step%d/%s", k+1, fp.name), func(t *testing.T) {
					t.Parallel()
					work := filepath.Join(t.TempDir(), "db")
					copyDir(t, refs[k], work)
					r := killCLI(t, work, fp.name, 0, append(steps[k], "--db", db(work), "--json")...)
					require.True(t, r.killed, "IDEM_FAULT=%s: not killed (exit %d): %s", fp.name, r.code, r.stderr)
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
				copyDir(t, refs[0], work)
				r := killCLI(t, work, "", delay, append(steps[0], "--db", db(work), "--json")...)
				check(t, 0, work, r, point{}, fmt.Sprintf("trial %d (kill after %s)", i, delay))
			})
		}
	})
}
