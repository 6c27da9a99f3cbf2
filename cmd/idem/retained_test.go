package main

import (
	"bytes"
	"database/sql"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/idem-dev/idem/internal/job"
	"github.com/idem-dev/idem/internal/ops"

	"github.com/stretchr/testify/require"
)

// storeFiles lists every file under the retained-input store, relative to it.
func storeFiles(t *testing.T, db string) []string {
	t.Helper()
	dir := db + ".inputs"
	out := []string{}
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if os.IsNotExist(err) {
			return filepath.SkipAll
		}
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		out = append(out, rel)
		return err
	})
	require.NoError(t, err)
	slices.Sort(out)
	return out
}

// requireStoreIsCommitted requires the retained-input store to hold exactly
// one file per committed idem.inputs row and nothing else (no temporary file,
// no copy of a failed run, no original of an erased input).
func requireStoreIsCommitted(t *testing.T, db string) {
	t.Helper()
	want := []string{}
	for _, s := range committedInputs(t, db) {
		want = append(want, filepath.Join(s[:2], s))
	}
	slices.Sort(want)
	require.Equal(t, want, storeFiles(t, db), "the retained-input store holds exactly the committed inputs")
}

// committedInputs reads idem.inputs through DuckDB alone: run.Open
// would sweep the store first and hide what the command under test left.
func committedInputs(t *testing.T, db string) []string {
	t.Helper()
	conn, err := sql.Open("duckdb", "")
	require.NoError(t, err)
	defer conn.Close()
	conn.SetMaxOpenConns(1)
	_, err = conn.Exec("ATTACH '" + strings.ReplaceAll(db, "'", "''") + "' AS inspected (READ_ONLY)")
	require.NoError(t, err)
	rows, err := conn.Query(`SELECT DISTINCT sha256 FROM inspected.idem.inputs ORDER BY 1`)
	require.NoError(t, err)
	defer rows.Close()
	out := []string{}
	for rows.Next() {
		var s string
		require.NoError(t, rows.Scan(&s))
		out = append(out, s)
	}
	require.NoError(t, rows.Err())
	return out
}

// within fails the test when f does not return in time: a command that
// reads a FIFO would otherwise hang the test binary.
func within(t *testing.T, d time.Duration, f func() cliResult) cliResult {
	t.Helper()
	done := make(chan cliResult, 1)
	go func() { done <- f() }()
	select {
	case r := <-done:
		return r
	case <-time.After(d):
		t.Fatalf("the command did not return within %s", d)
		return cliResult{}
	}
}

// A failed run (malformed JSON on line 2) commits nothing and leaves no
// retained copy: the subject's payload is nowhere under <db>.inputs/.
func TestFailedRunLeavesNoRetainedCopy(t *testing.T) {
	t.Parallel()
	j := appliedGuardJob(t)
	before, files := captureState(t, j.db), storeFiles(t, j.db)
	bad := j.input("bad.jsonl",
		`{"change_id":"s-1","entity_id":"subject-9","source_version":1,"operation":"upsert","value":"secret-payload-77"}`,
		`{"change_id":"s-2",`)
	r := j.run("--input", bad)
	require.Equal(t, job.ExitFailure, r.code, r.stderr)
	require.Contains(t, r.stderr, "line 2")
	// The store first: opening the database (captureState) sweeps it.
	require.Equal(t, files, storeFiles(t, j.db), "the failed run's copy is gone")
	require.Empty(t, storeHolds(t, j.db, "secret-payload-77"))
	requireStoreIsCommitted(t, j.db)
	require.Equal(t, before, captureState(t, j.db))
}

// A retained copy edited after it was stored (same size) is never staged
// from: a run of the same input re-copies it, and rerun refuses to replay it
// (exit 1, naming the file).
func TestTamperedRetainedCopy(t *testing.T) {
	t.Parallel()
	j := newGuardJob(t)
	first := j.apply()
	require.Len(t, first.Inputs, 1)
	orig, err := os.ReadFile(changesFixture(t, "batch-1.jsonl"))
	require.NoError(t, err)
	copyPath := filepath.Join(j.db+".inputs", first.Inputs[0].SHA256[:2], first.Inputs[0].SHA256)
	tamper := func() {
		require.NoError(t, os.WriteFile(copyPath, bytes.Replace(orig, []byte("bronze"), []byte("bronzf"), 1), 0o644))
	}

	tamper()
	r := callIdem(t, "rerun", j.file, "--snapshot", "1", "--json")
	require.Equal(t, job.ExitFailure, r.code, "rerun from a tampered copy: %s %s", r.stdout, r.stderr)
	require.Contains(t, r.stderr, "retained input batch-1.jsonl ("+copyPath+") was changed")

	again := j.apply("--batch-id", "again")
	require.Equal(t, first.RowsIn, again.RowsIn)
	require.Equal(t, first.InputSHA256, again.InputSHA256)
	got, err := os.ReadFile(copyPath)
	require.NoError(t, err)
	require.Equal(t, string(orig), string(got), "the retained copy was replaced by the input's bytes")
	require.Equal(t, 0, len(j.query(`SELECT 1 FROM customer_state_outcomes WHERE value = 'bronzf'`)), "nothing staged from the tampered copy")
	requireStoreIsCommitted(t, j.db)
}

// A FIFO or a device as input (named, or matched by a glob) is refused with
// exit 1 before any byte is read, and nothing is retained.
func TestNonRegularInputRefused(t *testing.T) {
	t.Parallel()
	j := appliedGuardJob(t)
	fifo := filepath.Join(j.dir, "pipe.jsonl")
	require.NoError(t, syscall.Mkfifo(fifo, 0o644))
	globDir := filepath.Join(j.dir, "many")
	require.NoError(t, os.MkdirAll(globDir, 0o755))
	writeText(t, filepath.Join(globDir, "a.jsonl"), `{"change_id":"g-1","entity_id":"e","source_version":9,"operation":"upsert","value":"v"}`+"\n")
	require.NoError(t, syscall.Mkfifo(filepath.Join(globDir, "b.jsonl"), 0o644))
	cases := []struct{ name, input, want string }{
		{"fifo", fifo, "input " + fifo + ": not a regular file (a named pipe)"},
		{"dev zero", "/dev/zero", "input /dev/zero: not a regular file (a character device)"},
		{"glob", filepath.Join(globDir, "*.jsonl"), "input " + filepath.Join(globDir, "b.jsonl") + ": not a regular file (a named pipe)"},
	}
	for _, tc := range cases {
		before, files := captureState(t, j.db), storeFiles(t, j.db)
		r := within(t, 60*time.Second, func() cliResult { return j.run("--input", tc.input) })
		require.Equal(t, job.ExitFailure, r.code, "%s: %s", tc.name, r.stderr)
		require.Contains(t, r.stderr, tc.want, tc.name)
		require.Equal(t, files, storeFiles(t, j.db), tc.name)
		require.Equal(t, before, captureState(t, j.db), tc.name)
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
			j := newGuardJob(t)
			res := j.apply("--input", j.input("b1.jsonl",
				`{"change_id":"a-1","entity_id":"alice","source_version":5,"operation":"upsert","value":"v5"}`,
				`{"change_id":"a-2","entity_id":"alice","source_version":`+tc.raw+`,"operation":"upsert","value":"odd"}`,
				`{"change_id":"b-1","entity_id":"bob","source_version":1,"operation":"upsert","value":"b"}`))
			require.Equal(t, int64(1), res.Outcomes["invalid_version"], res.Outcomes)
			r := callIdem(t, "erase", j.file, "--key", "alice", "--json")
			require.Equal(t, 0, r.code, r.stderr)
			var er ops.EraseResult
			require.NoError(t, json.Unmarshal([]byte(r.stdout), &er))
			require.NotNil(t, er.Position)
			require.Equal(t, int64(5), *er.Position)
			require.Equal(t, [][]any{{int64(5)}}, j.query(`SELECT position FROM idem.erasures WHERE key = 'alice'`))

			later := j.apply("--input", j.input("b2.jsonl",
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
	j := newGuardJob(t)
	first := j.apply()
	store := j.db + ".inputs"
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
		writeText(t, p, `{"entity_id":"ghost"}`)
	}
	r := j.run("--json") // the same batch again: already committed
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, `"decision":"already_committed"`)
	for _, p := range stale {
		require.NoFileExists(t, p)
	}
	require.NoDirExists(t, filepath.Join(store, "ab"))
	requireStoreIsCommitted(t, j.db)
	require.Len(t, storeFiles(t, j.db), 1)
}
