package datatest

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/idem-dev/idem/internal/report"

	"github.com/idem-dev/idem/cmd/idem/cli/internal/clitest"
	"github.com/idem-dev/idem/internal/history"
	"github.com/stretchr/testify/require"
)

// within fails the test when f does not return in time: a command that
// reads a FIFO would otherwise hang the test binary.
func within(t *testing.T, d time.Duration, f func() clitest.CLIResult) clitest.CLIResult {
	t.Helper()
	done := make(chan clitest.CLIResult, 1)
	go func() { done <- f() }()
	select {
	case r := <-done:
		return r
	case <-time.After(d):
		t.Fatalf("the command did not return within %s", d)
		return clitest.CLIResult{}
	}
}

// A failed run (malformed JSON on line 2) commits nothing and leaves no
// retained copy: the subject's payload is nowhere under <db>.inputs/.
func TestFailedRunLeavesNoRetainedCopy(t *testing.T) {
	t.Parallel()
	j := clitest.AppliedGuardJob(t)
	before, files := clitest.CaptureState(t, j.DB), clitest.StoreFiles(t, j.DB)
	bad := j.Input("bad.jsonl",
		`{"change_id":"s-1","entity_id":"subject-9","source_version":1,"operation":"upsert","value":"secret-payload-77"}`,
		`{"change_id":"s-2",`)
	r := j.Run("--input", bad)
	require.Equal(t, report.ExitFailure, r.Code, r.Stderr)
	require.Contains(t, r.Stderr, "line 2")
	// The store first: opening the database (CaptureState) sweeps it.
	require.Equal(t, files, clitest.StoreFiles(t, j.DB), "the failed run's copy is gone")
	require.Empty(t, clitest.StoreHolds(t, j.DB, "secret-payload-77"))
	clitest.RequireStoreIsCommitted(t, j.DB)
	require.Equal(t, before, clitest.CaptureState(t, j.DB))
}

// A retained copy edited after it was stored (same size) is never staged
// from: a run of the same input re-copies it, and rerun refuses to replay it
// (exit 1, naming the file).
func TestTamperedRetainedCopy(t *testing.T) {
	t.Parallel()
	j := clitest.NewGuardJob(t)
	first := j.Apply()
	require.Len(t, first.Inputs, 1)
	orig, err := os.ReadFile(clitest.ChangesFixture(t, "batch-1.jsonl"))
	require.NoError(t, err)
	copyPath := filepath.Join(j.DB+".inputs", first.Inputs[0].SHA256[:2], first.Inputs[0].SHA256)
	tamper := func() {
		require.NoError(t, os.WriteFile(copyPath, bytes.Replace(orig, []byte("bronze"), []byte("bronzf"), 1), 0o644))
	}

	tamper()
	r := clitest.CallIdem(t, "rerun", j.File, "--snapshot", "1", "--json")
	require.Equal(t, report.ExitFailure, r.Code, "rerun from a tampered copy: %s %s", r.Stdout, r.Stderr)
	require.Contains(t, r.Stderr, "retained input batch-1.jsonl ("+copyPath+") was changed")

	again := j.Apply("--batch-id", "again")
	require.Equal(t, first.RowsIn, again.RowsIn)
	require.Equal(t, first.InputSHA256, again.InputSHA256)
	got, err := os.ReadFile(copyPath)
	require.NoError(t, err)
	require.Equal(t, string(orig), string(got), "the retained copy was replaced by the input's bytes")
	require.Equal(t, 0, len(j.Query(`SELECT 1 FROM customer_state_outcomes WHERE value = 'bronzf'`)), "nothing staged from the tampered copy")
	clitest.RequireStoreIsCommitted(t, j.DB)
}

// A FIFO or a device as input (named, or matched by a glob) is refused with
// exit 1 before any byte is read, and nothing is retained.
func TestNonRegularInputRefused(t *testing.T) {
	t.Parallel()
	j := clitest.AppliedGuardJob(t)
	fifo := filepath.Join(j.Dir, "pipe.jsonl")
	require.NoError(t, syscall.Mkfifo(fifo, 0o644))
	globDir := filepath.Join(j.Dir, "many")
	require.NoError(t, os.MkdirAll(globDir, 0o755))
	clitest.WriteText(t, filepath.Join(globDir, "a.jsonl"), `{"change_id":"g-1","entity_id":"e","source_version":9,"operation":"upsert","value":"v"}`+"\n")
	require.NoError(t, syscall.Mkfifo(filepath.Join(globDir, "b.jsonl"), 0o644))
	cases := []struct{ name, input, want string }{
		{"fifo", fifo, "input " + fifo + ": not a regular file (a named pipe)"},
		{"dev zero", "/dev/zero", "input /dev/zero: not a regular file (a character device)"},
		{"glob", filepath.Join(globDir, "*.jsonl"), "input " + filepath.Join(globDir, "b.jsonl") + ": not a regular file (a named pipe)"},
	}
	for _, tc := range cases {
		before, files := clitest.CaptureState(t, j.DB), clitest.StoreFiles(t, j.DB)
		r := within(t, 60*time.Second, func() clitest.CLIResult { return j.Run("--input", tc.input) })
		require.Equal(t, report.ExitFailure, r.Code, "%s: %s", tc.name, r.Stderr)
		require.Contains(t, r.Stderr, tc.want, tc.name)
		require.Equal(t, files, clitest.StoreFiles(t, j.DB), tc.name)
		require.Equal(t, before, clitest.CaptureState(t, j.DB), tc.name)
	}
}

// Erase takes the erasure point only from rows whose position the stage
// step accepted, read by the stage step's rule: a row of the subject with
// source_version "1e18" (or 7_000, "\u00a0 999", ++888) is invalid_version
// and does not move the point, so a later upsert above the valid version
// is accepted, not erased.
func TestErasePositionFromValidRowsOnly(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, raw string
		later     int64 // the position a wrong parse would have erased up to
	}{
		{"exponent", `"1e18"`, 1000},
		{"underscore", `"7_000"`, 7000},
		{"nbsp", `"\u00a0 999"`, 999},
		{"double plus", `"++888"`, 888},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			j := clitest.NewGuardJob(t)
			res := j.Apply("--input", j.Input("b1.jsonl",
				`{"change_id":"a-1","entity_id":"alice","source_version":5,"operation":"upsert","value":"v5"}`,
				`{"change_id":"a-2","entity_id":"alice","source_version":`+tc.raw+`,"operation":"upsert","value":"odd"}`,
				`{"change_id":"b-1","entity_id":"bob","source_version":1,"operation":"upsert","value":"b"}`))
			require.Equal(t, int64(1), res.Outcomes["invalid_version"], res.Outcomes)
			r := clitest.CallIdem(t, "erase", j.File, "--key", "alice", "--json")
			require.Equal(t, 0, r.Code, r.Stderr)
			var er history.EraseResult
			require.NoError(t, json.Unmarshal([]byte(r.Stdout), &er))
			require.NotNil(t, er.Position)
			require.Equal(t, int64(5), *er.Position)
			require.Equal(t, [][]any{{int64(5)}}, j.Query(`SELECT position FROM idem.erasures WHERE key = sha256(salt || 'alice')`))

			later := j.Apply("--input", j.Input("b2.jsonl",
				`{"change_id":"a-3","entity_id":"alice","source_version":`+jsonInt(tc.later)+`,"operation":"upsert","value":"new life"}`))
			require.Equal(t, map[string]int64{"accepted": 1}, later.Outcomes)
		})
	}
}

func jsonInt(n int64) string { b, _ := json.Marshal(n); return string(b) }

// Temporary files a killed retain or erase left in the store, and files no
// committed row names, are removed by the next command that opens the
// database for writing; committed copies stay.
func TestStaleStoreFilesRemoved(t *testing.T) {
	t.Parallel()
	j := clitest.NewGuardJob(t)
	first := j.Apply()
	store := j.DB + ".inputs"
	sub := filepath.Join(store, first.Inputs[0].SHA256[:2])
	stale := []string{
		filepath.Join(sub, ".idem-tmp-retain-123"),
		filepath.Join(sub, ".idem-tmp-erase-456"),
		filepath.Join(sub, ".erase-789"),
		filepath.Join(sub, ".tmp-000"),
		filepath.Join(store, "ab", strings.Repeat("ab", 32)),
	}
	for _, p := range stale {
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		clitest.WriteText(t, p, `{"entity_id":"ghost"}`)
	}
	r := j.Run("--json") // the same batch again: already committed
	require.Equal(t, 0, r.Code, r.Stderr)
	require.Contains(t, r.Stdout, `"decision":"already_committed"`)
	for _, p := range stale {
		require.NoFileExists(t, p)
	}
	require.NoDirExists(t, filepath.Join(store, "ab"))
	clitest.RequireStoreIsCommitted(t, j.DB)
	require.Len(t, clitest.StoreFiles(t, j.DB), 1)
}
