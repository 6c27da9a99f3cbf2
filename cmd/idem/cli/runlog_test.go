package cli

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/idem-dev/idem/internal/catalog"
	"github.com/idem-dev/idem/internal/report"
	"github.com/idem-dev/idem/internal/run"

	"github.com/idem-dev/idem/cmd/idem/cli/internal/clitest"
	"github.com/stretchr/testify/require"
)

// logOf runs `idem log JOB --json` and returns the runs, newest first.
func logOf(t *testing.T, jobFile string) []catalog.LogEntry {
	t.Helper()
	r := clitest.CallIdem(t, "log", jobFile, "--json")
	require.Equal(t, 0, r.Code, r.Stderr)
	var out struct {
		Runs []catalog.LogEntry `json:"runs"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.Stdout), &out), r.Stdout)
	return out.Runs
}

// logRow is what these tests compare of a log entry: decision, batch id
// ("" for none) and whether the reason contains want.
type logRow struct {
	decision, batch, reason string
}

func requireLog(t *testing.T, jobFile string, want []logRow) []catalog.LogEntry {
	t.Helper()
	runs := logOf(t, jobFile)
	require.Len(t, runs, len(want), "one log entry per invocation: %+v", runs)
	for i, w := range want {
		e := runs[i]
		require.Equal(t, w.decision, e.Decision, "entry %d", i)
		batch := ""
		if e.BatchID != nil {
			batch = *e.BatchID
		}
		require.Equal(t, w.batch, batch, "entry %d", i)
		if w.reason == "" {
			require.Nil(t, e.Message, "entry %d", i)
		} else {
			require.NotNil(t, e.Message, "entry %d has no reason", i)
			require.Contains(t, *e.Message, w.reason, "entry %d", i)
		}
	}
	return runs
}

// Every invocation of run on a files-mode job is in the log: the applied
// batch, a run with nothing new, the refusal of an edited committed file
// and a usage error, each with its decision and reason.
func TestLogEveryRunOfAFilesJob(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	jobFile := filepath.Join(dir, "trips.toml")
	clitest.WriteFile(t, jobFile, filesJob(dir, "per_file"))
	db := filepath.Join(dir, "test.duckdb")
	landing(t, dir, "a.jsonl", 0, 3)

	r := clitest.CallIdem(t, "run", jobFile)
	require.Equal(t, 0, r.Code, r.Stderr)
	r = clitest.CallIdem(t, "run", jobFile)
	require.Equal(t, 0, r.Code, r.Stderr)
	require.Contains(t, r.Stdout, "skipped: nothing new")

	landing(t, dir, "a.jsonl", 0, 4) // a committed file edited
	before := clitest.CaptureState(t, db)
	r = clitest.CallIdem(t, "run", jobFile)
	require.Equal(t, report.ExitRefused, r.Code, r.Stderr)
	require.Equal(t, before, clitest.CaptureState(t, db))

	r = clitest.CallIdem(t, "run", jobFile, "--batch-id", "x")
	require.Equal(t, report.ExitUsage, r.Code, r.Stderr)
	require.Equal(t, before, clitest.CaptureState(t, db))

	runs := requireLog(t, jobFile, []logRow{
		{"failed", "", "--batch-id"},
		{"refused", "", "changed after it was committed"},
		{"skipped", "", "nothing new"},
		{"applied", "a.jsonl", ""},
	})
	require.True(t, runs[3].FirstLoad)
	for _, e := range runs[:3] {
		require.Equal(t, int64(1), e.Snapshot, "a run that wrote nothing logs the job's snapshot")
	}
}

// Every invocation of run on a chunked job is in the log: its chunks (and
// no empty trailing look past the watermark), a run with nothing past the
// watermark, a usage error and an input that is gone.
func TestLogEveryRunOfAChunkedJob(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	makeParquet(t, filepath.Join(dir, "big.parquet"), 3000, 1024)
	jobFile := filepath.Join(dir, "job.toml")
	clitest.WriteFile(t, jobFile, chunkJob(dir, 1000))

	r := clitest.CallIdem(t, "run", jobFile, "--json")
	require.Equal(t, 0, r.Code, r.Stderr)
	var res run.ChunksResult
	require.NoError(t, json.Unmarshal([]byte(r.Stdout), &res))
	require.Greater(t, len(res.Runs), 1)
	r = clitest.CallIdem(t, "run", jobFile)
	require.Equal(t, 0, r.Code, r.Stderr)
	r = clitest.CallIdem(t, "run", jobFile, "--batch-id", "x")
	require.Equal(t, report.ExitUsage, r.Code, r.Stderr)
	r = clitest.CallIdem(t, "run", jobFile, "--input", filepath.Join(dir, "gone.parquet"))
	require.Equal(t, report.ExitFailure, r.Code, r.Stderr)

	want := []logRow{
		{"failed", "", "gone.parquet"},
		{"failed", "", "--batch-id"},
		{"skipped", "big.parquet@" + fmt.Sprint(*res.Watermark), fmt.Sprintf("nothing past watermark %d", *res.Watermark)},
	}
	for i := len(res.Runs) - 1; i >= 0; i-- {
		want = append(want, logRow{"applied", res.Runs[i].BatchID, ""})
	}
	requireLog(t, jobFile, want)
}

// A single run that cannot read its input is logged as failed; one whose
// batch is refused is logged as refused, with the reason.
func TestLogRunThatFailsBeforeItsTransaction(t *testing.T) {
	t.Parallel()
	j := clitest.AppliedGuardJob(t)
	r := j.Run("--input", filepath.Join(j.Dir, "missing.jsonl"))
	require.Equal(t, report.ExitFailure, r.Code, r.Stderr)
	j.Refused("--input", clitest.ChangesFixture(t, "batch-2.jsonl"), "--batch-id", "batch-1.jsonl")
	requireLog(t, j.File, []logRow{
		{"refused", "batch-1.jsonl", "a changed batch needs a new batch id"},
		{"failed", "", "missing.jsonl"},
		{"applied", "batch-1.jsonl", ""},
	})
}

// A batch id with control characters keeps one run on one line of the log
// table and of run's output, escaped; --json keeps it exactly.
func TestLogEscapesControlCharacters(t *testing.T) {
	t.Parallel()
	j := clitest.NewGuardJob(t)
	id := "b\n2\tx\x1b[31m\u2028é\\"
	r := j.Run("--batch-id", id)
	require.Equal(t, 0, r.Code, r.Stderr)
	require.Contains(t, r.Stdout, "  batch     b\\n2\\tx\\x1b[31m\\u2028é\\\n")
	r = clitest.CallIdem(t, "log", j.File)
	require.Equal(t, 0, r.Code, r.Stderr)
	lines := strings.Split(strings.TrimSuffix(r.Stdout, "\n"), "\n")
	require.Len(t, lines, 2, r.Stdout)
	require.Contains(t, lines[1], `  b\n2\tx\x1b[31m\u2028é\  applied`)
	runs := logOf(t, j.File)
	require.Equal(t, id, *runs[0].BatchID)

	require.Equal(t, `a\x00b\xffc\u00a0d "q"`, escapeCell("a\x00b\xffc\u00a0d \"q\""))
	require.Equal(t, "plain id-1.jsonl", escapeCell("plain id-1.jsonl"))
}

// A refusal's reason is the table's last column: DECISION stays as narrow
// as its longest decision, and CHANGED shows first_load for the first
// commit.
func TestLogReasonIsTheLastColumn(t *testing.T) {
	t.Parallel()
	j := clitest.AppliedGuardJob(t)
	j.Refused("--input", clitest.ChangesFixture(t, "batch-2.jsonl"), "--batch-id", "batch-1.jsonl")
	r := clitest.CallIdem(t, "log", j.File)
	require.Equal(t, 0, r.Code, r.Stderr)
	lines := strings.Split(strings.TrimSuffix(r.Stdout, "\n"), "\n")
	require.Len(t, lines, 3)
	require.Regexp(t, `^TIME\s+BATCH\s+DECISION\s+CHANGED\s+ROWS IN\s+OUTCOMES\s+SNAPSHOT\s+CURSOR\s+EPOCH\s+REASON$`, lines[0])
	require.LessOrEqual(t, strings.Index(lines[0], "CHANGED")-strings.Index(lines[0], "DECISION"), len("refused")+2+len("  "))
	require.Regexp(t, `\s+batch-1\.jsonl\s+refused\s+input\s+-\s+1\s+0\s+1\s+refused: batch batch-1\.jsonl was committed with digest [0-9a-f]+; this input's digest is [0-9a-f]+: a changed batch needs a new batch id$`, lines[1])
	require.Regexp(t, `\s+batch-1\.jsonl\s+applied\s+first_load\s+15\s+accepted=5 .*\s+1\s+0\s+1$`, lines[2])

	require.Equal(t, "abc…\nab\n", cutLines("abcdef\nab\n", 4))
	require.Equal(t, "ab\n", cutLines("ab\n", 4))
}

// run reports what the batch wrote beside the table's total, and how many
// conflicts the target keeps.
func TestRunRowsWrittenAndConflicts(t *testing.T) {
	t.Parallel()
	j := clitest.NewGuardJob(t)
	first := j.Apply()
	// batch-1: accounts 1, 2, 3, 4 (a conflict) and 5 (a tombstone).
	require.Equal(t, int64(5), first.RowsOut)
	require.Equal(t, int64(5), first.RowsWritten)
	require.NotNil(t, first.Conflicts)
	require.Equal(t, int64(1), *first.Conflicts)

	in := j.Input("b2.jsonl",
		`{"change_id":"d-1","entity_id":"account-1","source_version":1,"operation":"upsert","value":"bronze"}`, // duplicate
		`{"change_id":"d-2","entity_id":"account-3","source_version":1,"operation":"upsert","value":"x"}`,      // stale
		`{"change_id":"d-3","entity_id":"account-8","source_version":1,"operation":"upsert","value":"new"}`,    // a new row
		`{"change_id":"d-4","entity_id":"account-4","source_version":4,"operation":"upsert","value":"green"}`,  // clears the conflict
	)
	r := j.Run("--input", in)
	require.Equal(t, 0, r.Code, r.Stderr)
	require.Contains(t, r.Stdout, "  rows      written 2 · table customer_state 6\n")
	require.NotContains(t, r.Stdout, "conflicts")
	second := j.Apply("--input", in) // already committed: wrote nothing
	require.Equal(t, int64(0), second.RowsWritten)
	require.Equal(t, int64(6), second.RowsOut)

	// The human summary names the conflicts kept in the target.
	k := clitest.NewGuardJob(t)
	r = k.Run()
	require.Equal(t, 0, r.Code, r.Stderr)
	require.Contains(t, r.Stdout, "  rows      written 5 · table customer_state 5\n")
	require.Contains(t, r.Stdout, "  conflicts 1 (kept in customer_state with status conflict and NULL values; excluded from customer_state_active)\n")

	// merge_by_key keeps its conflicts in the target too.
	dir := t.TempDir()
	jobFile := filepath.Join(dir, "trips.toml")
	clitest.WriteFile(t, jobFile, filesJob(dir, "per_file"))
	clitest.WriteFile(t, filepath.Join(dir, "landing", "a.jsonl"), `{"trip_id": 1, "fare": 1.5, "updated_at": 1}
{"trip_id": 1, "fare": 2.5, "updated_at": 1}
{"trip_id": 2, "fare": 2.5, "updated_at": 1}
`)
	r = clitest.CallIdem(t, "run", jobFile)
	require.Equal(t, 0, r.Code, r.Stderr)
	require.Contains(t, r.Stdout, "  rows      written 2 · table trips 2\n")
	require.Contains(t, r.Stdout, "  conflicts 1 (kept in trips with status conflict")
	require.Equal(t, []int64{1}, clitest.QueryInts(t, filepath.Join(dir, "test.duckdb"), `SELECT count(*) FROM trips WHERE idem_status = 'conflict'`))
}

// A refresh writes its whole target; a skipped refresh writes nothing. A
// pipeline that keeps no conflicts reports conflicts null.
func TestRunRowsWrittenRefresh(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	input, err := filepath.Abs(filepath.Join("..", "..", "..", "fixtures", "sample", "occurrences-a.csv"))
	require.NoError(t, err)
	jobFile := filepath.Join(dir, "sample.toml")
	require.NoError(t, os.WriteFile(jobFile, []byte(fmt.Sprintf(`name = "sample"
pipeline = "sample"
transform_version = 1
schema_version = 1
database = %q

[input]
path = %q
`, filepath.Join(dir, "idem.duckdb"), input)), 0o644))
	for _, decision := range []string{"loaded", "skipped"} {
		r := clitest.CallIdem(t, "run", jobFile, "--json")
		require.Equal(t, 0, r.Code, r.Stderr)
		var res map[string]any
		require.NoError(t, json.Unmarshal([]byte(r.Stdout), &res))
		require.Equal(t, decision, res["decision"])
		require.Greater(t, res["rows_out"], 0.0)
		want := res["rows_out"]
		if decision == "skipped" {
			want = 0.0
		}
		require.Equal(t, want, res["rows_written"])
		require.Contains(t, res, "conflicts")
		require.Nil(t, res["conflicts"])
	}
}
