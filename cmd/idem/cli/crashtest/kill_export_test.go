package crashtest

import (
	"crypto/sha256"
	"encoding/hex"
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

// The export kill test: idem export runs as a subprocess and is SIGKILLed at
// every export fault point and after random delays, into an output that is
// absent or holds the previous export. After each kill the output must be
// absent (when it was), the previous export or the complete new one, never
// a part; the retry must succeed with a manifest whose sha256s are the
// files', and leave no temporary file of the killed export beside the
// output. One random kill per case, 30 with IDEM_LONG=1
// (IDEM_KILL_TRIALS=N sets the number).
func TestKillExport(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("kill test runs idem as a subprocess; skipped with -short")
	}
	trials := clitest.KillTrials(t, 1, 30)
	dir := t.TempDir()

	// Two snapshots with different rows: the previous export is of
	// snapshot 1, the killed one of snapshot 2.
	j := clitest.NewGuardJob(t)
	var one, two []string
	for i := range 3000 {
		one = append(one, fmt.Sprintf(`{"change_id":"a-%d","entity_id":"e-%04d","source_version":1,"operation":"upsert","value":"v%02d"}`, i, i, i%12))
		if i%2 == 0 {
			two = append(two, fmt.Sprintf(`{"change_id":"b-%d","entity_id":"e-%04d","source_version":2,"operation":"upsert","value":"w%02d"}`, i, i, i%15))
		}
	}
	j.Apply("--input", j.Input("one.jsonl", one...))
	j.Apply("--input", j.Input("two.jsonl", two...))

	type exportCase struct {
		name  string
		flags []string // after --out
		out   string   // the output's name in its folder
	}
	cases := []exportCase{
		{"partitioned", []string{"--partition-by", "value"}, "parts"},
		{"single_file", nil, "rows.csv"},
	}
	exportArgs := func(work string, c exportCase, snapshot int) []string {
		return append([]string{"export", j.File, "--snapshot", strconv.Itoa(snapshot), "--out", filepath.Join(work, c.out), "--json"}, c.flags...)
	}
	// export runs a clean export in-process; a fault or a delay runs it in
	// a process of its own.
	export := func(t *testing.T, work string, c exportCase, snapshot int, fault string, delay time.Duration) clitest.CLIResult {
		if fault == "" && delay == 0 {
			return clitest.CallIdem(t, exportArgs(work, c, snapshot)...)
		}
		return clitest.KillCLI(t, work, fault, delay, exportArgs(work, c, snapshot)...)
	}
	// refs[c][s] is the tree of a clean export of snapshot s (0: none);
	// took[c] how long a clean export takes in a process of its own
	// (measured for the random kills).
	refs := map[string][]string{}
	took := map[string]*clitest.Once[time.Duration]{}
	for _, c := range cases {
		refs[c.name] = []string{""}
		took[c.name] = &clitest.Once[time.Duration]{}
		for s := 1; s <= 2; s++ {
			work := filepath.Join(dir, "ref", c.name, strconv.Itoa(s))
			require.NoError(t, os.MkdirAll(work, 0o755))
			r := export(t, work, c, s, "", 0)
			require.Equal(t, 0, r.Code, r.Stderr)
			refs[c.name] = append(refs[c.name], exportTree(t, filepath.Join(work, c.out)))
		}
		require.NotEqual(t, refs[c.name][1], refs[c.name][2])
	}
	tookExport := func(t *testing.T, c exportCase) time.Duration {
		return took[c.name].Get(t, func(t *testing.T) time.Duration {
			work := t.TempDir()
			start := time.Now()
			r := clitest.KillCLI(t, work, "", 0, exportArgs(work, c, 2)...)
			require.Equal(t, 0, r.Code, r.Stderr)
			return time.Since(start)
		})
	}

	// trial prepares a folder holding the export of snapshot prev (0:
	// nothing), runs the export of snapshot 2 with the fault or delay, and
	// checks what the kill left and what the retry makes of it.
	trial := func(t *testing.T, c exportCase, prev int, fault string, delay time.Duration) string {
		work := t.TempDir()
		if prev > 0 {
			r := export(t, work, c, prev, "", 0)
			require.Equal(t, 0, r.Code, r.Stderr)
		}
		r := export(t, work, c, 2, fault, delay)
		landed := "finished"
		if r.Killed {
			got := exportTree(t, filepath.Join(work, c.out))
			switch got {
			case refs[c.name][prev]:
				landed = "previous"
			case refs[c.name][2]:
				landed = "new"
			default:
				require.Failf(t, "partial export", "after a kill (%q, %s) the output is neither the previous export (snapshot %d) nor the new one:\n%s", fault, delay, prev, got)
			}
		} else {
			require.Equal(t, 0, r.Code, r.Stderr)
			require.Equal(t, refs[c.name][2], exportTree(t, filepath.Join(work, c.out)))
		}
		if fault != "" {
			require.True(t, r.Killed, "IDEM_FAULT=%s: the export was not killed (exit %d)\nstderr: %s", fault, r.Code, r.Stderr)
		}
		retry := export(t, work, c, 2, "", 0)
		require.Equal(t, 0, retry.Code, "retry after a kill: %s", retry.Stderr)
		require.Equal(t, refs[c.name][2], exportTree(t, filepath.Join(work, c.out)), "the retry gives the clean export")
		if c.flags != nil {
			clitest.ReadManifest(t, filepath.Join(work, c.out))
		}
		require.Equal(t, []string{c.out}, clitest.ListDir(t, work), "no temporary file outlives the retry")
		return landed
	}

	// Each fault point, into an absent output or over the previous export
	// (a kill after the swap needs one to swap with).
	type faultCase struct {
		point string
		prev  int
	}
	faults := map[string][]faultCase{
		"partitioned": {{"export_part:1", 0}, {"export_part:7", 1}, {"export_before_swap", 0}, {"export_before_swap", 1}, {"export_after_swap", 1}},
		"single_file": {{"export_before_swap", 0}, {"export_before_swap", 1}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for _, fc := range faults[c.name] {
				t.Run(fmt.Sprintf("%s/previous%d", fc.point, fc.prev), func(t *testing.T) {
					t.Parallel()
					landed := trial(t, c, fc.prev, fc.point, 0)
					want := "previous"
					if fc.point == "export_after_swap" {
						want = "new"
					}
					require.Equal(t, want, landed, "a kill at %s", fc.point)
				})
			}
			rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7))
			for i := range trials {
				seed := rng.Uint64()
				t.Run(fmt.Sprintf("random%d", i), func(t *testing.T) {
					t.Parallel()
					delay := time.Duration(rand.New(rand.NewPCG(seed, 2)).Int64N(int64(tookExport(t, c)) + 1))
					t.Logf("kill after %s: %s", delay, trial(t, c, 1-i%2, "", delay))
				})
			}
		})
	}
}

// exportTree renders a file or folder as its files' relative paths and
// sha256s, one a line, sorted; "" when it does not exist.
func exportTree(t *testing.T, path string) string {
	t.Helper()
	if _, err := os.Lstat(path); os.IsNotExist(err) {
		return ""
	}
	var lines []string
	require.NoError(t, filepath.WalkDir(path, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(path, p)
		sum := sha256.Sum256(data)
		lines = append(lines, filepath.ToSlash(rel)+" "+hex.EncodeToString(sum[:]))
		return err
	}))
	return strings.Join(lines, "\n")
}
