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

// TestKillErase is the kill test of erase and of the scrub of a replayed
// erased subject: after three batches, step 1 erases account-4 and step 2
// replays batch 1 under a new batch id (its account-4 rows come out erased
// and its retained copy is scrubbed before COMMIT). Each step is SIGKILLed at
// its fault points and after random delays. The database must then hold
// exactly the state before or after the step, the retry must succeed and
// give the state of one clean step, and after the retry no byte of the
// subject and no temporary file is left under <db>.inputs/: the store holds
// exactly the committed inputs. One random kill, 50 with IDEM_LONG=1
// (IDEM_KILL_TRIALS=N sets the number).
func TestKillErase(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("kill test runs idem as a subprocess; skipped with -short")
	}
	trials := clitest.KillTrials(t, 1, 50)
	const subject = `"account-4"`
	dir := t.TempDir()
	job := filepath.Join(dir, "changes.toml")
	clitest.WriteText(t, job, fmt.Sprintf(`name = "customer_state"
pipeline = "versioned_changes"
transform_version = 1
schema_version = 1
[input]
path = %q
[target]
table = "customer_state"
`+clitest.DuckdbSection, clitest.ChangesFixture(t, "batch-1.jsonl")))
	steps := [][]string{
		{"erase", job, "--key", "account-4"},
		{"run", job, "--input", clitest.ChangesFixture(t, "batch-1.jsonl"), "--batch-id", "replay-1"},
	}
	type point struct {
		name string
		post bool
	}
	points := [][]point{
		{{"after_target", false}, {"before_commit", false}, {"after_commit", true}, {"checkpoint", true}, {"after_checkpoint", true}},
		{{"after_step:04_commit.sql", false}, {"before_commit", false}, {"after_commit", true}, {"checkpoint", true}},
	}

	// refs[k]: the folder after k clean steps (k = 0: after the three
	// batches); dumps[k] its state; took[k] how long step k+1 takes in a
	// process of its own (measured for the random kills).
	base := filepath.Join(dir, "work")
	require.NoError(t, os.MkdirAll(base, 0o755))
	db := func(work string) string { return filepath.Join(work, "idem.duckdb") }
	for _, b := range []string{"batch-1", "batch-2", "batch-3"} {
		r := clitest.CallIdem(t, "run", job, "--db", db(base), "--input", clitest.ChangesFixture(t, b+".jsonl"))
		require.Equal(t, 0, r.Code, r.Stderr)
	}
	var refs, dumps []string
	for k := 0; k <= len(steps); k++ {
		if k > 0 {
			r := clitest.CallIdem(t, append(steps[k-1], "--db", db(base), "--json")...)
			require.Equal(t, 0, r.Code, r.Stderr)
		}
		ref := filepath.Join(dir, "refs", strconv.Itoa(k))
		clitest.CopyDir(t, base, ref)
		refs = append(refs, ref)
		dumps = append(dumps, clitest.DumpState(t, db(ref)))
	}
	took := make([]clitest.Once[time.Duration], len(steps))
	tookStep := func(t *testing.T, k int) time.Duration {
		return took[k].Get(t, func(t *testing.T) time.Duration {
			work := filepath.Join(t.TempDir(), "db")
			clitest.CopyDir(t, refs[k], work)
			start := time.Now()
			r := clitest.KillCLI(t, work, "", 0, append(steps[k], "--db", db(work), "--json")...)
			require.Equal(t, 0, r.Code, r.Stderr)
			return time.Since(start)
		})
	}
	require.NotEmpty(t, clitest.StoreHolds(t, db(refs[0]), subject), "the subject is retained before the erasure")

	check := func(t *testing.T, k int, work string, r clitest.CLIResult, post bool, how string) {
		t.Helper()
		if r.Killed {
			got := crashedState(t, work, refs[k], dumps[k])
			switch {
			case got == dumps[k] && !post:
			case got == dumps[k+1]:
				post = true
			default:
				require.Failf(t, "mixed state", "%s: neither the pre- nor the post-step state: %s", how, clitest.FirstDiff(dumps[k], got))
			}
			// Any command that opens the database, a read-only one too,
			// finishes the killed command's file work.
			q := clitest.CallIdem(t, "query", "--db", db(work), "SELECT count(*) FROM idem.snapshots")
			require.Equal(t, 0, q.Code, "%s: query after the kill: %s", how, q.Stderr)
			clitest.RequireStoreIsCommitted(t, db(work))
			if post || k == 1 {
				require.Empty(t, clitest.StoreHolds(t, db(work), subject), "%s: after a read-only command", how)
			}
			retry := clitest.CallIdem(t, append(steps[k], "--db", db(work), "--json")...)
			require.Equal(t, 0, retry.Code, "%s: retry: %s", how, retry.Stderr)
			if post && k == 0 {
				require.Contains(t, retry.Stdout, `"already_erased":true`, how)
			}
			if post && k == 1 {
				require.Contains(t, retry.Stdout, `"decision":"already_committed"`, how)
			}
		} else {
			require.Equal(t, 0, r.Code, "%s: %s", how, r.Stderr)
		}
		require.Equal(t, dumps[k+1], clitest.DumpState(t, db(work)), "%s: not the state of one clean step", how)
		require.Empty(t, clitest.StoreHolds(t, db(work), subject), "%s: the erased subject survives in the retained inputs", how)
		clitest.RequireStoreIsCommitted(t, db(work))
		require.NoError(t, filepath.WalkDir(work, func(p string, d os.DirEntry, err error) error {
			if err == nil && (strings.HasPrefix(d.Name(), ".idem-tmp-") || strings.HasPrefix(d.Name(), ".erase-")) {
				return fmt.Errorf("%s: temporary file %s outlived the retry", how, p)
			}
			return err
		}))
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
					check(t, k, work, r, fp.post, "IDEM_FAULT="+fp.name)
				})
			}
		}
	})
	t.Run("random_kills", func(t *testing.T) {
		rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7))
		for i := range trials {
			k := rng.IntN(len(steps))
			seed := rng.Uint64()
			t.Run(fmt.Sprintf("trial%d", i), func(t *testing.T) {
				t.Parallel()
				delay := time.Duration(rand.New(rand.NewPCG(seed, 2)).Int64N(int64(tookStep(t, k)) + 1))
				work := filepath.Join(t.TempDir(), "db")
				clitest.CopyDir(t, refs[k], work)
				r := clitest.KillCLI(t, work, "", delay, append(steps[k], "--db", db(work), "--json")...)
				check(t, k, work, r, false, fmt.Sprintf("trial %d (step %d, kill after %s)", i, k+1, delay))
			})
		}
	})
}
