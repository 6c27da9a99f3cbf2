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

// TestKillEraseChain is the kill test of an erasure through the chain:
// vc (versioned_changes) → src (a model) → down
// (merge_by_key over src's changes), and `idem erase vc --key alice`,
// which erases from vc, recomputes src and erases from down in one
// transaction. It is SIGKILLed at each fault point (and after random
// delays with IDEM_LONG=1): the database then holds the state before the
// erasure or after it, never one job erased and another not; the retry
// gives the state of one clean erasure, and no retained file holds the
// subject's payload.
func TestKillEraseChain(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("kill test runs idem as a subprocess; skipped with -short")
	}
	trials := clitest.KillTrials(t, 0, 30)
	const payload = "SECRETPAYLOAD"
	dir := t.TempDir()
	jobs := filepath.Join(dir, "jobs")
	clitest.WriteFile(t, filepath.Join(jobs, "vc.toml"), `name = "vc"
pipeline = "versioned_changes"
transform_version = 1
schema_version = 1
[input]
path = "../changes/*.jsonl"
format = "jsonl"
mode = "files"
`+clitest.DuckdbSection)
	clitest.WriteFile(t, filepath.Join(jobs, "src.toml"), `name = "src"
pipeline = "select"
transform_version = 1
[input]
upstream = ["vc"]
[transform]
sql = "models/src"
[target]
key = ["entity_id"]
`+clitest.DuckdbSection)
	clitest.WriteFile(t, filepath.Join(jobs, "models", "src", "v1.sql"), "SELECT entity_id, source_version, value FROM {{upstream:vc}} WHERE status = 'active'\n")
	clitest.WriteFile(t, filepath.Join(jobs, "down.toml"), `name = "down"
pipeline = "merge_by_key"
transform_version = 2
schema_version = 1
[input]
upstream = ["src"]
[input.columns]
entity_id = "VARCHAR"
source_version = "BIGINT"
value = "VARCHAR"
[target]
key = ["entity_id"]
order_by = "source_version"
`+clitest.DuckdbSection)
	clitest.WriteFile(t, filepath.Join(dir, "changes", "b1.jsonl"),
		`{"change_id":"1","entity_id":"alice","source_version":1,"operation":"upsert","value":"SECRETPAYLOAD1"}
{"change_id":"2","entity_id":"bob","source_version":1,"operation":"upsert","value":"bob1"}
`)
	clitest.WriteFile(t, filepath.Join(dir, "changes", "b2.jsonl"),
		`{"change_id":"3","entity_id":"alice","source_version":2,"operation":"upsert","value":"SECRETPAYLOAD2"}
`)
	db := func(work string) string { return filepath.Join(work, "idem.duckdb") }
	base := filepath.Join(dir, "work")
	require.NoError(t, os.MkdirAll(base, 0o755))
	r := clitest.CallIdem(t, "run", jobs, "--db", db(base))
	require.Equal(t, 0, r.Code, r.Stderr)
	step := []string{"erase", filepath.Join(jobs, "vc.toml"), "--key", "alice"}
	var refs, dumps []string
	for k := 0; k <= 1; k++ {
		if k > 0 {
			r := clitest.CallIdem(t, append(step, "--db", db(base), "--json")...)
			require.Equal(t, 0, r.Code, r.Stderr)
			require.Contains(t, r.Stdout, `"recomputed":[{"job":"src"`)
			require.Contains(t, r.Stdout, `"downstream":[{"job":"down"`)
		}
		ref := filepath.Join(dir, "refs", strconv.Itoa(k))
		clitest.CopyDir(t, base, ref)
		refs = append(refs, ref)
		dumps = append(dumps, clitest.DumpState(t, db(ref)))
	}
	require.NotEmpty(t, clitest.StoreHolds(t, db(refs[0]), payload), "the payload is retained before the erasure")

	check := func(t *testing.T, work string, r clitest.CLIResult, post bool, how string) {
		t.Helper()
		if r.Killed {
			got := crashedState(t, work, refs[0], dumps[0])
			switch {
			case got == dumps[0] && !post:
			case got == dumps[1]:
			default:
				require.Failf(t, "mixed state", "%s: neither the pre- nor the post-erasure state: %s", how, clitest.FirstDiff(dumps[0], got))
			}
			retry := clitest.CallIdem(t, append(step, "--db", db(work), "--json")...)
			require.Equal(t, 0, retry.Code, "%s: retry: %s", how, retry.Stderr)
		} else {
			require.Equal(t, 0, r.Code, "%s: %s", how, r.Stderr)
		}
		require.Equal(t, dumps[1], clitest.DumpState(t, db(work)), "%s: not the state of one clean erasure", how)
		require.Empty(t, clitest.StoreHolds(t, db(work), payload), "%s: the payload survives in the retained files", how)
		clitest.RequireStoreIsCommitted(t, db(work))
		// The journal records vc's key and down's subject and key, once
		// each, whether the kill came before its lines were written (the
		// retry's open writes them) or after.
		journal, err := os.ReadFile(db(work) + ".erasures")
		require.NoError(t, err, how)
		require.Equal(t, 3, strings.Count(string(journal), "\n"), "%s: journal %s", how, journal)
		require.NotContains(t, string(journal), "alice", how)
	}
	points := []struct {
		name string
		post bool
	}{{"after_target", false}, {"before_commit", false}, {"after_commit", true}, {"checkpoint", true}, {"after_checkpoint", true}}
	t.Run("fault_points", func(t *testing.T) {
		for _, fp := range points {
			t.Run(fp.name, func(t *testing.T) {
				t.Parallel()
				work := filepath.Join(t.TempDir(), "db")
				clitest.CopyDir(t, refs[0], work)
				r := clitest.KillCLI(t, work, fp.name, 0, append(step, "--db", db(work), "--json")...)
				require.True(t, r.Killed, "IDEM_FAULT=%s: not killed (exit %d): %s", fp.name, r.Code, r.Stderr)
				check(t, work, r, fp.post, "IDEM_FAULT="+fp.name)
			})
		}
	})
	var took clitest.Once[time.Duration]
	t.Run("random_kills", func(t *testing.T) {
		rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 26))
		for i := range trials {
			seed := rng.Uint64()
			t.Run(fmt.Sprintf("trial%d", i), func(t *testing.T) {
				t.Parallel()
				d := took.Get(t, func(t *testing.T) time.Duration {
					work := filepath.Join(t.TempDir(), "db")
					clitest.CopyDir(t, refs[0], work)
					start := time.Now()
					r := clitest.KillCLI(t, work, "", 0, append(step, "--db", db(work), "--json")...)
					require.Equal(t, 0, r.Code, r.Stderr)
					return time.Since(start)
				})
				delay := time.Duration(rand.New(rand.NewPCG(seed, 2)).Int64N(int64(d) + 1))
				work := filepath.Join(t.TempDir(), "db")
				clitest.CopyDir(t, refs[0], work)
				r := clitest.KillCLI(t, work, "", delay, append(step, "--db", db(work), "--json")...)
				check(t, work, r, false, fmt.Sprintf("trial %d (kill after %s)", i, delay))
			})
		}
	})
}
