package main

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/idem-dev/idem/internal/source"

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
// IDEM_KILL_TRIALS=N adds N random kills of each.
func TestKillCompactAndBackup(t *testing.T) {
	if testing.Short() {
		t.Skip("kill test runs idem as a subprocess; skipped with -short")
	}
	trials, _ := killTrials(t, 1)
	j := compactJob(t)
	ref := j.dir
	db := func(work string) string { return filepath.Join(work, "idem.duckdb") }
	pre := crashedState(t, ref)
	preSum, _, err := source.FileSHA256(j.db)
	require.NoError(t, err)
	latest := func(work string) string {
		r := killCLI(t, work, "", 0, "export", j.file, "--db", db(work), "--out", filepath.Join(t.TempDir(), "e.csv"), "--json")
		require.Equal(t, 0, r.code, r.stderr)
		return jsonField(t, r.stdout, "sha256")
	}
	wantExport := latest(ref)

	// took is how long a clean compact and a clean backup take.
	clean := filepath.Join(t.TempDir(), "clean")
	copyDir(t, ref, clean)
	start := time.Now()
	r := killCLI(t, clean, "", 0, "compact", "--db", db(clean))
	require.Equal(t, 0, r.code, r.stderr)
	tookCompact := time.Since(start)
	start = time.Now()
	r = killCLI(t, clean, "", 0, "backup", "--db", db(clean), "--out", filepath.Join(t.TempDir(), "b"))
	require.Equal(t, 0, r.code, r.stderr)
	tookBackup := time.Since(start)

	// checkDB requires the database in work to be the file before compact
	// or a compacted one, with the state and latest export of both.
	checkDB := func(t *testing.T, work string, compacted *bool) {
		t.Helper()
		sum, _, err := source.FileSHA256(db(work))
		require.NoError(t, err)
		switch {
		case sum == preSum:
			*compacted = false
		case !fileHolds(t, db(work), secretPayload):
			*compacted = true
		default:
			require.Fail(t, "the database file is neither the file before compact nor a compacted one")
		}
		_, err = os.Stat(db(work) + ".wal")
		require.True(t, os.IsNotExist(err), "a WAL is beside the database")
		got := crashedState(t, work)
		require.True(t, got == pre, "the tables changed: %s", firstDiff(pre, got))
	}
	retryCompact := func(t *testing.T, work string) {
		t.Helper()
		r := killCLI(t, work, "", 0, "compact", "--db", db(work), "--json")
		require.Equal(t, 0, r.code, "retry: %s", r.stderr)
		require.False(t, fileHolds(t, db(work), secretPayload))
		left, err := filepath.Glob(db(work) + ".*")
		require.NoError(t, err)
		require.Equal(t, []string{db(work) + ".inputs"}, left, "what the killed compact left beside the database outlived the retry")
		require.Equal(t, pre, dumpState(t, db(work)))
		require.Equal(t, wantExport, latest(work))
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
		for range trials {
			kills = append(kills, kill{delay: time.Duration(rng.Int64N(int64(tookCompact) + 1))})
		}
		for _, k := range kills {
			name := k.point
			if name == "" {
				name = fmt.Sprintf("after_%s", k.delay.Round(time.Millisecond))
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				work := filepath.Join(t.TempDir(), "db")
				copyDir(t, ref, work)
				r := killCLI(t, work, k.point, k.delay, "compact", "--db", db(work), "--json")
				if k.point != "" {
					require.True(t, r.killed, "IDEM_FAULT=%s: not killed (exit %d): %s", k.point, r.code, r.stderr)
				}
				if !r.killed {
					require.Equal(t, 0, r.code, r.stderr)
				}
				var compacted bool
				checkDB(t, work, &compacted)
				if k.point != "" {
					require.Equal(t, k.post, compacted, "after a kill at %s", k.point)
				}
				// A reader of the database meanwhile takes nothing the
				// killed compact left for the database.
				q := killCLI(t, work, "", 0, "query", "--db", db(work), "SELECT count(*) FROM customer_state")
				require.Equal(t, 0, q.code, q.stderr)
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
		for range trials {
			kills = append(kills, kill{delay: time.Duration(rng.Int64N(int64(tookBackup) + 1))})
		}
		for _, k := range kills {
			name := k.point
			if name == "" {
				name = fmt.Sprintf("after_%s", k.delay.Round(time.Millisecond))
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				work := filepath.Join(t.TempDir(), "db")
				copyDir(t, ref, work)
				out := filepath.Join(t.TempDir(), "backup")
				r := killCLI(t, work, k.point, k.delay, "backup", "--db", db(work), "--out", out, "--json")
				if k.point != "" {
					require.True(t, r.killed, "IDEM_FAULT=%s: not killed (exit %d): %s", k.point, r.code, r.stderr)
				}
				if r.killed {
					require.NoDirExists(t, out, "a killed backup left a folder at --out")
					v := killCLI(t, work, "", 0, "backup", "--verify", out)
					require.Equal(t, 1, v.code, v.stderr)
				} else {
					require.Equal(t, 0, r.code, r.stderr)
				}
				sum, _, err := source.FileSHA256(db(work))
				require.NoError(t, err)
				require.Equal(t, preSum, sum, "backup changed the database file")
				got := crashedState(t, work)
				require.True(t, got == pre, "the tables changed: %s", firstDiff(pre, got))
				if r.killed {
					r = killCLI(t, work, "", 0, "backup", "--db", db(work), "--out", out, "--json")
					require.Equal(t, 0, r.code, "retry: %s", r.stderr)
				}
				left, err := filepath.Glob(out + ".partial-*")
				require.NoError(t, err)
				require.Empty(t, left, "the partial folder of the killed backup outlived the retry")
				v := killCLI(t, work, "", 0, "backup", "--verify", out)
				require.Equal(t, 0, v.code, v.stderr)
				restored := restore(t, out)
				require.Equal(t, pre, dumpState(t, restored))
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
