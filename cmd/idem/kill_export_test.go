package main

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

	"github.com/stretchr/testify/require"
)

// The export kill test: idem export runs as a subprocess and is SIGKILLed at
// every export fault point and after random delays, into an output that is
// absent or holds the previous export. After each kill the output must be
// absent (when it was), the previous export or the complete new one, never
// a part; the retry must succeed with a manifest whose sha256s are the
// files', and leave no temporary file of the killed export beside the
// output. IDEM_KILL_TRIALS=N runs N random kills per case instead of 3.
func TestKillExport(t *testing.T) {
	if testing.Short() {
		t.Skip("kill test builds the binary and runs it as a subprocess; skipped with -short")
	}
	trials, _ := killTrials(t, 3)
	dir := t.TempDir()
	bin := buildIdem(t, dir)

	// Two snapshots with different rows: the previous export is of
	// snapshot 1, the killed one of snapshot 2.
	j := newGuardJob(t)
	var one, two []string
	for i := range 3000 {
		one = append(one, fmt.Sprintf(`{"change_id":"a-%d","entity_id":"e-%04d","source_version":1,"operation":"upsert","value":"v%02d"}`, i, i, i%12))
		if i%2 == 0 {
			two = append(two, fmt.Sprintf(`{"change_id":"b-%d","entity_id":"e-%04d","source_version":2,"operation":"upsert","value":"w%02d"}`, i, i, i%15))
		}
	}
	j.apply("--input", j.input("one.jsonl", one...))
	j.apply("--input", j.input("two.jsonl", two...))

	type exportCase struct {
		name  string
		flags []string // after --out
		out   string   // the output's name in its folder
	}
	cases := []exportCase{
		{"partitioned", []string{"--partition-by", "value"}, "parts"},
		{"single_file", nil, "rows.csv"},
	}
	export := func(work string, c exportCase, snapshot int, fault string, delay time.Duration) idemResult {
		args := append([]string{"export", j.file, "--snapshot", strconv.Itoa(snapshot), "--out", filepath.Join(work, c.out), "--json"}, c.flags...)
		return runIdemCmd(t, bin, work, fault, delay, nil, args...)
	}
	// refs[c][s] is the tree of a clean export of snapshot s (0: none).
	refs := map[string][]string{}
	took := map[string]time.Duration{}
	for _, c := range cases {
		refs[c.name] = []string{""}
		for s := 1; s <= 2; s++ {
			work := filepath.Join(dir, "ref", c.name, strconv.Itoa(s))
			require.NoError(t, os.MkdirAll(work, 0o755))
			start := time.Now()
			r := export(work, c, s, "", 0)
			took[c.name] = time.Since(start)
			require.Equal(t, 0, r.code, r.stderr)
			refs[c.name] = append(refs[c.name], exportTree(t, filepath.Join(work, c.out)))
		}
		require.NotEqual(t, refs[c.name][1], refs[c.name][2])
	}

	// trial prepares a folder holding the export of snapshot prev (0:
	// nothing), runs the export of snapshot 2 with the fault or delay, and
	// checks what the kill left and what the retry makes of it.
	trial := func(t *testing.T, c exportCase, prev int, fault string, delay time.Duration) string {
		work := t.TempDir()
		if prev > 0 {
			r := export(work, c, prev, "", 0)
			require.Equal(t, 0, r.code, r.stderr)
		}
		r := export(work, c, 2, fault, delay)
		landed := "finished"
		if r.killed {
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
			require.Equal(t, 0, r.code, r.stderr)
			require.Equal(t, refs[c.name][2], exportTree(t, filepath.Join(work, c.out)))
		}
		if fault != "" {
			require.True(t, r.killed, "IDEM_FAULT=%s: the export was not killed (exit %d)\nstderr: %s", fault, r.code, r.stderr)
		}
		retry := export(work, c, 2, "", 0)
		require.Equal(t, 0, retry.code, "retry after a kill: %s", retry.stderr)
		require.Equal(t, refs[c.name][2], exportTree(t, filepath.Join(work, c.out)), "the retry gives the clean export")
		if c.flags != nil {
			readManifest(t, filepath.Join(work, c.out))
		}
		require.Equal(t, []string{c.out}, listDir(t, work), "no temporary file outlives the retry")
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
			t.Parallel()
			for _, fc := range faults[c.name] {
				t.Run(fmt.Sprintf("%s/previous%d", fc.point, fc.prev), func(t *testing.T) {
					landed := trial(t, c, fc.prev, fc.point, 0)
					want := "previous"
					if fc.point == "export_after_swap" {
						want = "new"
					}
					require.Equal(t, want, landed, "a kill at %s", fc.point)
				})
			}
			t.Run("random", func(t *testing.T) {
				rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7))
				counts := map[string]int{}
				for i := range trials {
					delay := time.Duration(rng.Int64N(int64(took[c.name]) + 1))
					counts[trial(t, c, 1-i%2, "", delay)]++
				}
				t.Logf("%d random kills: %d left the previous export, %d the new one, %d finished first", trials, counts["previous"], counts["new"], counts["finished"])
			})
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
