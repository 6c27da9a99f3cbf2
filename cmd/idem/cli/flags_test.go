package cli

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idem-dev/idem/cmd/idem/cli/internal/clitest"
	"github.com/idem-dev/idem/internal/report"
)

// usageRefused runs idem with args, with and without --json, and requires
// exit 2, a message on stderr containing want (and the same error object
// with --json), and a database (every idem table and the run log) that did
// not change.
func usageRefused(t *testing.T, j *clitest.GuardJob, want string, args ...string) {
	t.Helper()
	runs := func() any { return j.Query("SELECT count(*) FROM idem.runs")[0][0] }
	before, logged := clitest.CaptureState(t, j.DB), runs()
	for _, jsonOut := range []bool{false, true} {
		a := args
		if jsonOut {
			a = append(append([]string{}, args...), "--json")
		}
		r := clitest.CallIdem(t, a...)
		require.Equal(t, report.ExitUsage, r.Code, "%v: stdout %s stderr %s", a, r.Stdout, r.Stderr)
		require.Contains(t, r.Stderr, want, "%v", a)
		if jsonOut {
			var obj struct {
				Error    string `json:"error"`
				ExitCode int    `json:"exit_code"`
			}
			require.NoError(t, json.Unmarshal([]byte(r.Stdout), &obj), "%v: %s", a, r.Stdout)
			require.Contains(t, obj.Error, want)
			require.Equal(t, report.ExitUsage, obj.ExitCode)
		} else {
			require.Empty(t, r.Stdout, "%v", a)
		}
	}
	require.Equal(t, before, clitest.CaptureState(t, j.DB), "%v changed the database", args)
	require.Equal(t, logged, runs(), "%v was logged as a run", args)
}

// TestBatchFlagsRunAndPlan: run and plan build their options from the same
// flags with the same checks, so a bad combination is the same usage error
// (exit 2, naming the flag, nothing written) for both.
func TestBatchFlagsRunAndPlan(t *testing.T) {
	t.Parallel()
	j := clitest.AppliedGuardJob(t)
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
				usageRefused(t, j, tc.want, append([]string{cmd, j.File}, tc.args...)...)
			})
		}
	}
	// The same flags given right still run (the flags are checked, not
	// refused).
	r := clitest.CallIdem(t, "plan", j.File, "--memory-limit", "512MiB", "--wait", "1s", "--batch-id", "b2", "--input", clitest.ChangesFixture(t, "batch-2.jsonl"))
	require.Equal(t, 0, r.Code, r.Stderr)
	require.Contains(t, r.Stdout, "would be applied")
}

// TestFlagValidation: the shared flags every command takes are checked
// before anything is opened: --jobs below 1 (for one job file and a
// project), a negative --wait and a --memory-limit DuckDB would not parse,
// on commands that write and ones that read.
func TestFlagValidation(t *testing.T) {
	t.Parallel()
	j := clitest.AppliedGuardJob(t)
	out := filepath.Join(j.Dir, "out.csv")
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"run", j.File, "--jobs", "0"}, "--jobs 0: want 1 or more"},
		{[]string{"run", j.File, "--jobs", "-2"}, "--jobs -2: want 1 or more"},
		{[]string{"run", j.Dir, "--jobs", "0"}, "--jobs 0: want 1 or more"},
		{[]string{"export", j.File, "--out", out, "--wait", "-5s"}, "--wait -5s: must not be negative"},
		{[]string{"erase", j.File, "--key", "account-1", "--wait", "-1ms"}, "--wait -1ms: must not be negative"},
		{[]string{"export", j.File, "--out", out, "--memory-limit", "lots"}, `--memory-limit: "lots" is not a DuckDB memory size`},
		{[]string{"rerun", j.File, "--memory-limit", "2 gigs"}, `--memory-limit: "2 gigs" is not a DuckDB memory size`},
		{[]string{"query", "--db", j.DB, "--memory-limit", "80%", "SELECT 1"}, `--memory-limit: "80%" is not a DuckDB memory size`},
		{[]string{"compact", "--db", j.DB, "--memory-limit", "lots"}, `--memory-limit: "lots" is not a DuckDB memory size`},
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
	j := clitest.AppliedGuardJob(t)
	text, err := os.ReadFile(j.File)
	require.NoError(t, err)
	// The job file ends with [duckdb] threads = 1 (DuckdbSection).
	lots := strings.Replace(string(text), clitest.DuckdbSection, clitest.DuckdbSection+"memory_limit = \"lots\"\n", 1)
	clitest.WriteText(t, j.File, lots)
	line := strings.Count(lots[:strings.Index(lots, "memory_limit")], "\n") + 1
	want := fmt.Sprintf(`%s:%d: duckdb.memory_limit: "lots" is not a DuckDB memory size`, j.File, line)
	for _, args := range [][]string{{"run", j.File}, {"plan", j.File}, {"export", j.File, "--out", filepath.Join(j.Dir, "x.csv")}} {
		usageRefused(t, j, want, args...)
	}
	clitest.WriteText(t, j.File, strings.Replace(string(text), clitest.DuckdbSection, clitest.DuckdbSection+"memory_limit = \"1GB\"\n", 1))
	r := clitest.CallIdem(t, "plan", j.File)
	require.Equal(t, 0, r.Code, r.Stderr)
}

// TestExpireFencing: with [job] fencing = "required", expire is a writing
// command like run, erase and rollback: without --epoch, or with a stale
// one, it is refused (exit 3, the message they give, naming the current
// epoch) and changes nothing; with the current epoch it expires.
func TestExpireFencing(t *testing.T) {
	t.Parallel()
	j := clitest.AppliedGuardJob(t)
	j.Apply("--input", clitest.ChangesFixture(t, "batch-2.jsonl"))
	text, err := os.ReadFile(j.File)
	require.NoError(t, err)
	clitest.WriteText(t, j.File, string(text)+"\n[job]\nfencing = \"required\"\n")
	r := clitest.CallIdem(t, "fence", j.File)
	require.Equal(t, 0, r.Code, r.Stderr)
	_, _, epoch := j.State()
	e := fmt.Sprint(epoch)

	missing := fmt.Sprintf(`refused: job customer_state requires fencing ([job] fencing = "required"): pass --epoch %d, the job's current epoch (see idem fence)`, epoch)
	stale := fmt.Sprintf("refused: stale writer: epoch 1 is not the job's current epoch %d", epoch)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"expire", j.File, "--keep-snapshots", "1"}, missing},
		{[]string{"expire", j.File, "--keep-snapshots", "1", "--epoch", "1"}, stale},
		{[]string{"expire", j.File, "--keep-snapshots", "1", "--dry-run"}, missing},
		{[]string{"expire", j.File, "--keep-snapshots", "1", "--json"}, missing},
		// run, erase and rollback say the same.
		{[]string{"run", j.File, "--input", clitest.ChangesFixture(t, "batch-3.jsonl")}, missing},
		{[]string{"rollback", j.File, "--to-snapshot", "1"}, missing},
	} {
		before := clitest.CaptureState(t, j.DB)
		r := clitest.CallIdem(t, tc.args...)
		require.Equal(t, report.ExitRefused, r.Code, "%v: stdout %s stderr %s", tc.args, r.Stdout, r.Stderr)
		require.Equal(t, "idem: "+tc.want+"\n", r.Stderr, "%v", tc.args)
		require.Equal(t, before, clitest.CaptureState(t, j.DB), "%v changed the database", tc.args)
	}
	r = clitest.CallIdem(t, "expire", j.File, "--keep-snapshots", "1", "--epoch", e, "--json")
	require.Equal(t, 0, r.Code, r.Stderr)
	require.Contains(t, r.Stdout, `"expired":1`)
}
