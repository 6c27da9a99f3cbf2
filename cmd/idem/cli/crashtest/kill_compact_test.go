package crashtest

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/idem-dev/idem/internal/source"

	"github.com/idem-dev/idem/cmd/idem/cli/internal/clitest"
	"github.com/stretchr/testify/require"
)

// TestKillCompactAndBackup: compact and backup are SIGKILLed at each of
// their fault points and after random delays, on a database with history
// and an erased subject. The database then holds exactly its state before
// (the same file, byte for byte) or after (the compacted file, without the
// erased payload), the same tables either way; the next command removes
// what the killed one left beside the database, and a retry finishes. A
// killed backup leaves no folder at --out (only a partial one beside it,
// which --verify does not take and the retry removes).
// One random kill of each, 20 with IDEM_LONG=1 (IDEM_KILL_TRIALS=N sets
// the number).
func TestKillCompactAndBackup(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("kill test runs idem as a subprocess; skipped with -short")
	}
	trials := clitest.KillTrials(t, 1, 20)
	j := clitest.CompactJob(t)
	ref := j.Dir
	db := func(work string) string { return filepath.Join(work, "idem.duckdb") }
	pre := clitest.DumpState(t, j.DB)
	preSum, _, err := source.FileSHA256(j.DB)
	require.NoError(t, err)
	latest := func(t *testing.T, work string) string {
		r := clitest.CallIdem(t, "export", j.File, "--db", db(work), "--out", filepath.Join(t.TempDir(), "e.csv"), "--json")
		require.Equal(t, 0, r.Code, r.Stderr)
		return jsonField(t, r.Stdout, "sha256")
	}
	wantExport := latest(t, ref)

	// took is how long a clean compact or backup takes in a process of its
	// own (measured for the random kills).
	var tookCompact, tookBackup clitest.Once[time.Duration]
	took := func(t *testing.T, o *clitest.Once[time.Duration], args ...string) time.Duration {
		return o.Get(t, func(t *testing.T) time.Duration {
			clean := filepath.Join(t.TempDir(), "clean")
			clitest.CopyDir(t, ref, clean)
			for i, a := range args {
				if a == "DB" {
					args[i] = db(clean)
				}
			}
			start := time.Now()
			r := clitest.KillCLI(t, clean, "", 0, args...)
			require.Equal(t, 0, r.Code, r.Stderr)
			return time.Since(start)
		})
	}

	// checkDB requires the database in work to be the file before compact
	// or a compacted one, with the state and latest export of both.
	checkDB := func(t *testing.T, work string, compacted *bool) {
		t.Helper()
		sum, _, err := source.FileSHA256(db(work))
		require.NoError(t, err)
		switch {
		case sum == preSum:
			*compacted = false
		case !clitest.FileHolds(t, db(work), clitest.SecretPayload):
			*compacted = true
		default:
			require.Fail(t, "the database file is neither the file before compact nor a compacted one")
		}
		_, err = os.Stat(db(work) + ".wal")
		require.True(t, os.IsNotExist(err), "a WAL is beside the database")
		got := crashedState(t, work, ref, pre)
		require.True(t, got == pre, "the tables changed: %s", clitest.FirstDiff(pre, got))
	}
	retryCompact := func(t *testing.T, work string) {
		t.Helper()
		r := clitest.CallIdem(t, "compact", "--db", db(work), "--json")
		require.Equal(t, 0, r.Code, "retry: %s", r.Stderr)
		require.False(t, clitest.FileHolds(t, db(work), clitest.SecretPayload))
		left, err := filepath.Glob(db(work) + ".*")
		require.NoError(t, err)
		// The erasure journal stays: the database's erasures are in it;
		// so does the secret its verdicts are signed with (run/verdicts.go).
		require.Equal(t, []string{db(work) + ".erasures", db(work) + ".inputs", db(work) + ".verdicts-key"}, left, "what the killed compact left beside the database outlived the retry")
		require.Equal(t, pre, clitest.DumpState(t, db(work)))
		require.Equal(t, wantExport, latest(t, work))
	}

	t.Run("compact", func(t *testing.T) {
		rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 3))
		type kill struct {
			point string
			delay time.Duration
			post  bool
		}
		kills := []kill{
			{point: "compact_written"}, {point: "compact_verified"},
			{point: "compact_before_rename"}, {point: "compact_after_rename", post: true},
		}
		for i := range trials {
			kills = append(kills, kill{point: fmt.Sprintf("random%d", i), delay: time.Duration(rng.Uint64() >> 1)})
		}
		for _, k := range kills {
			t.Run(k.point, func(t *testing.T) {
				t.Parallel()
				if k.delay > 0 {
					k.point = ""
					k.delay %= took(t, &tookCompact, "compact", "--db", "DB") + 1
					t.Logf("kill after %s", k.delay)
				}
				work := filepath.Join(t.TempDir(), "db")
				clitest.CopyDir(t, ref, work)
				r := clitest.KillCLI(t, work, k.point, k.delay, "compact", "--db", db(work), "--json")
				if k.point != "" {
					require.True(t, r.Killed, "IDEM_FAULT=%s: not killed (exit %d): %s", k.point, r.Code, r.Stderr)
				}
				if !r.Killed {
					require.Equal(t, 0, r.Code, r.Stderr)
				}
				var compacted bool
				checkDB(t, work, &compacted)
				if k.point != "" {
					require.Equal(t, k.post, compacted, "after a kill at %s", k.point)
				}
				// A reader of the database meanwhile takes nothing the
				// killed compact left for the database.
				q := clitest.CallIdem(t, "query", "--db", db(work), "SELECT count(*) FROM customer_state")
				require.Equal(t, 0, q.Code, q.Stderr)
				retryCompact(t, work)
			})
		}
	})

	t.Run("backup", func(t *testing.T) {
		rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 4))
		type kill struct {
			point string
			delay time.Duration
		}
		kills := []kill{{point: "backup_copied"}, {point: "backup_before_manifest"}, {point: "backup_before_rename"}}
		for i := range trials {
			kills = append(kills, kill{point: fmt.Sprintf("random%d", i), delay: time.Duration(rng.Uint64() >> 1)})
		}
		for _, k := range kills {
			t.Run(k.point, func(t *testing.T) {
				t.Parallel()
				if k.delay > 0 {
					k.point = ""
					k.delay %= took(t, &tookBackup, "backup", "--db", "DB", "--out", filepath.Join(t.TempDir(), "b")) + 1
					t.Logf("kill after %s", k.delay)
				}
				work := filepath.Join(t.TempDir(), "db")
				clitest.CopyDir(t, ref, work)
				out := filepath.Join(t.TempDir(), "backup")
				r := clitest.KillCLI(t, work, k.point, k.delay, "backup", "--db", db(work), "--out", out, "--json")
				if k.point != "" {
					require.True(t, r.Killed, "IDEM_FAULT=%s: not killed (exit %d): %s", k.point, r.Code, r.Stderr)
				}
				// A random kill may land after the backup was renamed into
				// place, as the process exits: --out is then the whole
				// backup, checked below like a clean one's.
				_, statErr := os.Stat(out)
				finished := !r.Killed || (k.point == "" && statErr == nil)
				if !finished {
					require.NoDirExists(t, out, "a killed backup left a folder at --out")
					v := clitest.CallIdem(t, "backup", "--verify", out)
					require.Equal(t, 1, v.Code, v.Stderr)
				} else if !r.Killed {
					require.Equal(t, 0, r.Code, r.Stderr)
				}
				sum, _, err := source.FileSHA256(db(work))
				require.NoError(t, err)
				require.Equal(t, preSum, sum, "backup changed the database file")
				got := crashedState(t, work, ref, pre)
				require.True(t, got == pre, "the tables changed: %s", clitest.FirstDiff(pre, got))
				if !finished {
					r = clitest.CallIdem(t, "backup", "--db", db(work), "--out", out, "--json")
					require.Equal(t, 0, r.Code, "retry: %s", r.Stderr)
				}
				left, err := filepath.Glob(out + ".partial-*")
				require.NoError(t, err)
				require.Empty(t, left, "the partial folder of the killed backup outlived the retry")
				v := clitest.CallIdem(t, "backup", "--verify", out)
				require.Equal(t, 0, v.Code, v.Stderr)
				restored := clitest.Restore(t, out)
				require.Equal(t, pre, clitest.DumpState(t, restored))
			})
		}
	})
}

// jsonField is the text value of a top-level key of a JSON object.
func jsonField(t *testing.T, text, key string) string {
	t.Helper()
	var m map[string]any
	require.NoError(t, json.Unmarshal([]byte(text), &m), text)
	return fmt.Sprint(m[key])
}
