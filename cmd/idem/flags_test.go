package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idem-dev/idem/internal/job"
)

// usageRefused runs idem with args, with and without --json, and requires
// exit 2, a message on stderr containing want (and the same error object
// with --json), and a database (every idem table and the run log) that did
// not change.
func usageRefused(t *testing.T, j *guardJob, want string, args ...string) {
	t.Helper()
	runs := func() any { return j.query("SELECT count(*) FROM idem.runs")[0][0] }
	before, logged := captureState(t, j.db), runs()
	for _, jsonOut := range []bool{false, true} {
		a := args
		if jsonOut {
			a = append(append([]string{}, args...), "--json")
		}
		r := callIdem(t, a...)
		require.Equal(t, job.ExitUsage, r.code, "%v: stdout %s stderr %s", a, r.stdout, r.stderr)
		require.Contains(t, r.stderr, want, "%v", a)
		if jsonOut {
			var obj struct {
				Error    string `json:"error"`
				ExitCode int    `json:"exit_code"`
			}
			require.NoError(t, json.Unmarshal([]byte(r.stdout), &obj), "%v: %s", a, r.stdout)
			require.Contains(t, obj.Error, want)
			require.Equal(t, job.ExitUsage, obj.ExitCode)
		} else {
			require.Empty(t, r.stdout, "%v", a)
		}
	}
	require.Equal(t, before, captureState(t, j.db), "%v changed the database", args)
	require.Equal(t, logged, runs(), "%v was logged as a run", args)
}

// TestBatchFlagsRunAndPlan: run and plan build their options from the same
// flags with the same checks, so a bad combination is the same usage error
// (exit 2, naming the flag, nothing written) for both.
func TestBatchFlagsRunAndPlan(t *testing.T) {
	t.Parallel()
	j := appliedGuardJob(t)
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"--from without --to", []string{"--from", "5"}, "--from and --to go together"},
		{"--to without --from", []string{"--to", "5"}, "--from and --to go together"},
		{"--batch-id given empty", []string{"--batch-id", ""}, "--batch-id is empty"},
		{"--batch-id= given empty", []string{"--batch-id="}, "--batch-id is empty"},
		{"--wait negative", []string{"--wait", "-5s"}, "--wait -5s: must not be negative"},
		{"--memory-limit not a size", []string{"--memory-limit", "lots"}, `--memory-limit: "lots" is not a DuckDB memory size`},
		{"--memory-limit without a unit", []string{"--memory-limit", "100"}, `--memory-limit: "100" is not a DuckDB memory size`},
	}
	for _, cmd := range []string{"run", "plan"} {
		for _, tc := range cases {
			t.Run(cmd+" "+tc.name, func(t *testing.T) {
				usageRefused(t, j, tc.want, append([]string{cmd, j.file}, tc.args...)...)
			})
		}
	}
	// The same flags given right still run (the flags are checked, not
	// refused).
	r := callIdem(t, "plan", j.file, "--memory-limit", "512MiB", "--wait", "1s", "--batch-id", "b2", "--input", changesFixture(t, "batch-2.jsonl"))
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "would be applied")
}

// TestFlagValidation: the shared flags every command takes are checked
// before anything is opened: --jobs below 1 (for one job file and a
// project), a negative --wait and a --memory-limit DuckDB would not parse,
// on commands that write and ones that read.
func TestFlagValidation(t *testing.T) {
	t.Parallel()
	j := appliedGuardJob(t)
	out := filepath.Join(j.dir, "out.csv")
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"run", j.file, "--jobs", "0"}, "--jobs 0: want 1 or more"},
		{[]string{"run", j.file, "--jobs", "-2"}, "--jobs -2: want 1 or more"},
		{[]string{"run", j.dir, "--jobs", "0"}, "--jobs 0: want 1 or more"},
		{[]string{"export", j.file, "--out", out, "--wait", "-5s"}, "--wait -5s: must not be negative"},
		{[]string{"erase", j.file, "--key", "account-1", "--wait", "-1ms"}, "--wait -1ms: must not be negative"},
		{[]string{"export", j.file, "--out", out, "--memory-limit", "lots"}, `--memory-limit: "lots" is not a DuckDB memory size`},
		{[]string{"rerun", j.file, "--memory-limit", "2 gigs"}, `--memory-limit: "2 gigs" is not a DuckDB memory size`},
		{[]string{"query", "--db", j.db, "--memory-limit", "80%", "SELECT 1"}, `--memory-limit: "80%" is not a DuckDB memory size`},
		{[]string{"compact", "--db", j.db, "--memory-limit", "lots"}, `--memory-limit: "lots" is not a DuckDB memory size`},
	}
	for _, tc := range cases {
		t.Run(fmt.Sprint(tc.args[0], " ", tc.args[2:]), func(t *testing.T) {
			usageRefused(t, j, tc.want, tc.args...)
		})
	}
	require.NoFileExists(t, out)
}

// TestJobFileMemoryLimit: [duckdb] memory_limit that DuckDB would not parse
// is a job-file error (exit 2) naming the file, the line and the key, for
// every command that loads the job, before the database is opened.
func TestJobFileMemoryLimit(t *testing.T) {
	t.Parallel()
	j := appliedGuardJob(t)
	text, err := os.ReadFile(j.file)
	require.NoError(t, err)
	// The job file ends with [duckdb] threads = 1 (duckdbSection).
	lots := strings.Replace(string(text), duckdbSection, duckdbSection+"memory_limit = \"lots\"\n", 1)
	writeText(t, j.file, lots)
	line := strings.Count(lots[:strings.Index(lots, "memory_limit")], "\n") + 1
	want := fmt.Sprintf(`%s:%d: duckdb.memory_limit: "lots" is not a DuckDB memory size`, j.file, line)
	for _, args := range [][]string{{"run", j.file}, {"plan", j.file}, {"export", j.file, "--out", filepath.Join(j.dir, "x.csv")}} {
		usageRefused(t, j, want, args...)
	}
	writeText(t, j.file, strings.Replace(string(text), duckdbSection, duckdbSection+"memory_limit = \"1GB\"\n", 1))
	r := callIdem(t, "plan", j.file)
	require.Equal(t, 0, r.code, r.stderr)
}

// TestExpireFencing: with [job] fencing = "required", expire is a writing
// command like run, erase and rollback: without --epoch, or with a stale
// one, it is refused (exit 3, the message they give, naming the current
// epoch) and changes nothing; with the current epoch it expires.
func TestExpireFencing(t *testing.T) {
	t.Parallel()
	j := appliedGuardJob(t)
	j.apply("--input", changesFixture(t, "batch-2.jsonl"))
	text, err := os.ReadFile(j.file)
	require.NoError(t, err)
	writeText(t, j.file, string(text)+"\n[job]\nfencing = \"required\"\n")
	r := callIdem(t, "fence", j.file)
	require.Equal(t, 0, r.code, r.stderr)
	_, _, epoch := j.state()
	e := fmt.Sprint(epoch)

	missing := fmt.Sprintf(`refused: job customer_state requires fencing ([job] fencing = "required"): pass --epoch %d, the job's current epoch (see idem fence)`, epoch)
	stale := fmt.Sprintf("refused: stale writer: epoch 1 is not the job's current epoch %d", epoch)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"expire", j.file, "--keep-snapshots", "1"}, missing},
		{[]string{"expire", j.file, "--keep-snapshots", "1", "--epoch", "1"}, stale},
		{[]string{"expire", j.file, "--keep-snapshots", "1", "--dry-run"}, missing},
		{[]string{"expire", j.file, "--keep-snapshots", "1", "--json"}, missing},
		// run, erase and rollback say the same.
		{[]string{"run", j.file, "--input", changesFixture(t, "batch-3.jsonl")}, missing},
		{[]string{"rollback", j.file, "--to-snapshot", "1"}, missing},
	} {
		before := captureState(t, j.db)
		r := callIdem(t, tc.args...)
		require.Equal(t, job.ExitRefused, r.code, "%v: stdout %s stderr %s", tc.args, r.stdout, r.stderr)
		require.Equal(t, "idem: "+tc.want+"\n", r.stderr, "%v", tc.args)
		require.Equal(t, before, captureState(t, j.db), "%v changed the database", tc.args)
	}
	r = callIdem(t, "expire", j.file, "--keep-snapshots", "1", "--epoch", e, "--json")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, `"expired":1`)
}
