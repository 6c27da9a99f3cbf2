package guardtest

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/idem-dev/idem/internal/catalog"
	"github.com/idem-dev/idem/internal/report"
	"github.com/idem-dev/idem/internal/run"

	"github.com/idem-dev/idem/cmd/idem/cli"
	"github.com/idem-dev/idem/cmd/idem/cli/internal/clitest"
	"github.com/stretchr/testify/require"
)

// A lost success response: the batch committed, the client retries. The
// retry reports already_committed with the original batch's snapshot and
// counts from the ledger, exits 0 and writes nothing.
func TestRetryOfCommittedBatchIsAlreadyCommitted(t *testing.T) {
	t.Parallel()
	j := clitest.NewGuardJob(t)
	first := j.Apply("--input", clitest.ChangesFixture(t, "batch-1.jsonl"))
	require.Equal(t, report.DecisionApplied, first.Decision)
	require.Equal(t, int64(1), first.Snapshot)
	second := j.Apply("--input", clitest.ChangesFixture(t, "batch-2.jsonl"))
	require.Equal(t, int64(2), second.Snapshot)

	before := clitest.CaptureState(t, j.DB)
	retry := j.Apply("--input", clitest.ChangesFixture(t, "batch-1.jsonl"))
	require.Equal(t, report.DecisionAlreadyCommitted, retry.Decision)
	require.Equal(t, "batch-1.jsonl", retry.BatchID)
	require.Equal(t, first.Snapshot, retry.Snapshot, "the original batch's snapshot, not the latest")
	require.Equal(t, first.RowsIn, retry.RowsIn)
	require.Equal(t, first.Outcomes, retry.Outcomes)
	require.Equal(t, before, clitest.CaptureState(t, j.DB))

	human := j.Run("--input", clitest.ChangesFixture(t, "batch-1.jsonl"))
	require.Equal(t, 0, human.Code, human.Stderr)
	require.Contains(t, human.Stdout, "customer_state: already_committed")
	require.Contains(t, human.Stdout, "snapshot  1\n")
	require.Equal(t, before, clitest.CaptureState(t, j.DB))

	// The ledger holds exactly one row per batch.
	require.Equal(t, [][]any{{"batch-1.jsonl", int64(1)}, {"batch-2.jsonl", int64(2)}},
		j.Query(`SELECT batch_id, snapshot FROM idem.ledger ORDER BY snapshot`))
}

// A batch id names one content and one interval: reusing it for other rows
// or other bounds is refused (exit 3), names the batch and writes nothing.
func TestBatchIdentityCoversRowsAndBounds(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		first  []string
		second []string
	}{
		{"other rows", []string{"--batch-id", "b1", "--input", "batch-1.jsonl"}, []string{"--batch-id", "b1", "--input", "batch-2.jsonl"}},
		{"other rows, same bounds", []string{"--batch-id", "b1", "--input", "batch-1.jsonl", "--from", "0", "--to", "10"}, []string{"--batch-id", "b1", "--input", "batch-2.jsonl", "--from", "0", "--to", "10"}},
		{"same rows, other upper bound", []string{"--batch-id", "b1", "--input", "batch-1.jsonl", "--from", "0", "--to", "10"}, []string{"--batch-id", "b1", "--input", "batch-1.jsonl", "--from", "0", "--to", "12"}},
		{"same rows, bounds dropped", []string{"--batch-id", "b1", "--input", "batch-1.jsonl", "--from", "0", "--to", "10"}, []string{"--batch-id", "b1", "--input", "batch-1.jsonl"}},
		{"same rows, bounds added", []string{"--batch-id", "b1", "--input", "batch-1.jsonl"}, []string{"--batch-id", "b1", "--input", "batch-1.jsonl", "--from", "0", "--to", "10"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			j := clitest.NewGuardJob(t)
			res := j.Apply(withFixtures(t, tc.first)...)
			require.Equal(t, report.DecisionApplied, res.Decision)
			stderr := j.Refused(withFixtures(t, tc.second)...)
			require.Contains(t, stderr, "batch b1 was committed with digest")
			require.Contains(t, stderr, "a changed batch needs a new batch id")

			runs := j.Log()
			require.Equal(t, report.DecisionRefused, runs[0].Decision)
			require.Equal(t, "b1", *runs[0].BatchID)
			require.Contains(t, *runs[0].Message, "batch b1")

			// The committed batch is still recognised as committed.
			again := j.Apply(withFixtures(t, tc.first)...)
			require.Equal(t, report.DecisionAlreadyCommitted, again.Decision)
		})
	}
}

// withFixtures turns each argument after --input into a fixture path.
func withFixtures(t *testing.T, args []string) []string {
	out := append([]string(nil), args...)
	for i := 1; i < len(out); i++ {
		if out[i-1] == "--input" {
			out[i] = clitest.ChangesFixture(t, out[i])
		}
	}
	return out
}

// An old batch replayed under a new id is applied again, but its rows come
// out stale: it can neither overwrite a newer value nor bring back a deleted
// entity.
func TestOlderReplayCannotOverwriteOrResurrect(t *testing.T) {
	t.Parallel()
	j := clitest.NewGuardJob(t)
	old := j.Input("old.jsonl",
		`{"change_id":"a-1","entity_id":"e1","source_version":1,"operation":"upsert","value":"one"}`,
		`{"change_id":"a-2","entity_id":"e2","source_version":1,"operation":"upsert","value":"old"}`)
	newer := j.Input("newer.jsonl",
		`{"change_id":"b-1","entity_id":"e1","source_version":2,"operation":"delete","value":null}`,
		`{"change_id":"b-2","entity_id":"e2","source_version":2,"operation":"upsert","value":"new"}`)
	require.Equal(t, map[string]int64{"accepted": 2}, j.Apply("--input", old).Outcomes)
	require.Equal(t, map[string]int64{"accepted": 2}, j.Apply("--input", newer).Outcomes)
	want := [][]any{{"e1", int64(2), "deleted", nil}, {"e2", int64(2), "active", "new"}}
	require.Equal(t, want, j.Query(`SELECT entity_id, source_version, status, value FROM customer_state ORDER BY entity_id`))

	replay := j.Apply("--input", old, "--batch-id", "old-replayed")
	require.Equal(t, report.DecisionApplied, replay.Decision)
	require.Equal(t, map[string]int64{"stale": 2}, replay.Outcomes)
	require.Equal(t, want, j.Query(`SELECT entity_id, source_version, status, value FROM customer_state ORDER BY entity_id`))
	require.Equal(t, [][]any{{"e2", "new"}}, j.Query(`SELECT entity_id, value FROM customer_state_active ORDER BY entity_id`))
	require.Equal(t, [][]any{{"a-1", "stale"}, {"a-2", "stale"}},
		j.Query(`SELECT change_id, outcome FROM customer_state_outcomes WHERE batch_id = 'old-replayed' ORDER BY change_id`))

	// The same replay under the old id is the old batch: already committed.
	require.Equal(t, report.DecisionAlreadyCommitted, j.Apply("--input", old).Decision)
}

// --from/--to: the first bounded batch starts at 0, each next one where the
// cursor is; a gap or an overlap is refused naming both numbers; an empty
// interval commits and advances the cursor.
func TestCursorBounds(t *testing.T) {
	t.Parallel()
	j := clitest.NewGuardJob(t)
	j.Create()
	b1, b2, b3 := clitest.ChangesFixture(t, "batch-1.jsonl"), clitest.ChangesFixture(t, "batch-2.jsonl"), clitest.ChangesFixture(t, "batch-3.jsonl")

	stderr := j.Refused("--input", b1, "--from", "5", "--to", "10")
	require.Contains(t, stderr, "batch batch-1.jsonl starts at 5 but the job's cursor is 0 (a gap)")

	res := j.Apply("--input", b1, "--from", "0", "--to", "10")
	require.Equal(t, report.DecisionApplied, res.Decision)
	require.Equal(t, int64(10), res.Cursor)
	snap, cursor, _ := j.State()
	require.Equal(t, []int64{1, 10}, []int64{snap, cursor})

	stderr = j.Refused("--input", b2, "--from", "11", "--to", "20")
	require.Contains(t, stderr, "batch batch-2.jsonl starts at 11 but the job's cursor is 10 (a gap): the next batch must start at 10")
	stderr = j.Refused("--input", b2, "--from", "9", "--to", "20")
	require.Contains(t, stderr, "batch batch-2.jsonl starts at 9 but the job's cursor is 10 (an overlap): the next batch must start at 10")

	empty := j.Input("empty.jsonl")
	res = j.Apply("--input", empty, "--from", "10", "--to", "20")
	require.Equal(t, report.DecisionApplied, res.Decision)
	require.Equal(t, int64(0), res.RowsIn)
	require.Empty(t, res.Outcomes)
	require.Equal(t, int64(2), res.Snapshot)
	require.Equal(t, int64(20), res.Cursor)
	snap, cursor, _ = j.State()
	require.Equal(t, []int64{2, 20}, []int64{snap, cursor})
	require.Equal(t, [][]any{{"empty.jsonl", int64(10), int64(20), int64(0), int64(2)}},
		j.Query(`SELECT batch_id, from_pos, to_pos, rows_in, snapshot FROM idem.ledger WHERE batch_id = 'empty.jsonl'`))

	// The empty batch retried is already committed, not a second interval.
	require.Equal(t, report.DecisionAlreadyCommitted, j.Apply("--input", empty, "--from", "10", "--to", "20").Decision)

	res = j.Apply("--input", b2, "--from", "20", "--to", "30")
	require.Equal(t, int64(30), res.Cursor)
	// A batch without bounds leaves the cursor where it is.
	res = j.Apply("--input", b3)
	require.Equal(t, int64(30), res.Cursor)
	snap, cursor, _ = j.State()
	require.Equal(t, []int64{4, 30}, []int64{snap, cursor})

	// A retry of an earlier interval is recognised by the ledger before the
	// cursor is compared: already committed, not an overlap.
	before := clitest.CaptureState(t, j.DB)
	retry := j.Apply("--input", b1, "--from", "0", "--to", "10")
	require.Equal(t, report.DecisionAlreadyCommitted, retry.Decision)
	require.Equal(t, int64(1), retry.Snapshot)
	require.Equal(t, before, clitest.CaptureState(t, j.DB))

	// Bounds that are not an interval are usage errors.
	for _, args := range [][]string{{"--from", "30", "--to", "30"}, {"--from", "30", "--to", "25"}, {"--from", "30"}, {"--to", "40"}} {
		r := j.Run(append([]string{"--input", b3, "--batch-id", "x"}, args...)...)
		require.Equal(t, report.ExitUsage, r.Code, "%v: %s", args, r.Stderr)
		require.Equal(t, before, clitest.CaptureState(t, j.DB))
	}
}

// A missing input is an error, never an empty batch: nothing is written and
// the cursor stays.
func TestMissingInputIsAnError(t *testing.T) {
	t.Parallel()
	j := clitest.NewGuardJob(t)
	j.Apply("--input", clitest.ChangesFixture(t, "batch-1.jsonl"), "--from", "0", "--to", "10")
	cases := []struct {
		name, input, want string
	}{
		{"no such file", filepath.Join(j.Dir, "nothere.jsonl"), "nothere.jsonl"},
		{"glob that matches nothing", filepath.Join(j.Dir, "none-*.jsonl"), "no file matches"},
		{"a directory", j.Dir, "is a directory"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := clitest.CaptureState(t, j.DB)
			for _, bounds := range [][]string{nil, {"--from", "10", "--to", "20"}} {
				r := j.Run(append([]string{"--input", tc.input}, bounds...)...)
				require.Contains(t, []int{report.ExitFailure, report.ExitUsage}, r.Code, r.Stderr)
				require.Contains(t, r.Stderr, tc.want)
				require.Equal(t, before, clitest.CaptureState(t, j.DB))
			}
		})
	}
	_, cursor, _ := j.State()
	require.Equal(t, int64(10), cursor)
}

// fence advances the epoch in its own transaction; a writer holding the old
// epoch is refused, the new one commits; a run without --epoch is not fenced.
func TestFence(t *testing.T) {
	t.Parallel()
	t.Run("after runs", func(t *testing.T) {
		t.Parallel()
		j := clitest.NewGuardJob(t)
		res := j.Apply("--input", clitest.ChangesFixture(t, "batch-1.jsonl"), "--epoch", "1")
		require.Equal(t, int64(1), res.Epoch)

		r := clitest.CallIdem(t, "fence", j.File, "--json")
		require.Equal(t, 0, r.Code, r.Stderr)
		require.Equal(t, `{"job":"customer_state","epoch":2}`+"\n", r.Stdout)
		r = clitest.CallIdem(t, "fence", j.File)
		require.Equal(t, 0, r.Code, r.Stderr)
		require.Equal(t, "customer_state: epoch 3\n", r.Stdout)
		snap, _, epoch := j.State()
		require.Equal(t, []int64{1, 3}, []int64{snap, epoch})

		for _, old := range []string{"1", "2", "4"} {
			stderr := j.Refused("--input", clitest.ChangesFixture(t, "batch-2.jsonl"), "--epoch", old)
			require.Contains(t, stderr, "stale writer: epoch "+old+" is not the job's current epoch 3")
		}
		res = j.Apply("--input", clitest.ChangesFixture(t, "batch-2.jsonl"), "--epoch", "3")
		require.Equal(t, report.DecisionApplied, res.Decision)
		require.Equal(t, []int64{2, 3}, []int64{res.Snapshot, res.Epoch})
		snap, _, epoch = j.State()
		require.Equal(t, []int64{2, 3}, []int64{snap, epoch})

		res = j.Apply("--input", clitest.ChangesFixture(t, "batch-3.jsonl"))
		require.Equal(t, report.DecisionApplied, res.Decision)
		require.Equal(t, int64(3), res.Epoch)
	})
	t.Run("before the first run", func(t *testing.T) {
		t.Parallel()
		j := clitest.NewGuardJob(t)
		r := clitest.CallIdem(t, "fence", j.File, "--json")
		require.Equal(t, 0, r.Code, r.Stderr)
		require.Equal(t, `{"job":"customer_state","epoch":2}`+"\n", r.Stdout)
		j.Refused("--input", clitest.ChangesFixture(t, "batch-1.jsonl"), "--epoch", "1")
		res := j.Apply("--input", clitest.ChangesFixture(t, "batch-1.jsonl"), "--epoch", "2")
		require.Equal(t, report.DecisionApplied, res.Decision)
		require.True(t, res.FirstLoad)
		require.Equal(t, []int64{1, 2}, []int64{res.Snapshot, res.Epoch})
	})
}

// idem log lists every run newest first, with what each decided, including
// runs that wrote nothing; runs recorded within the same second keep their
// order.
func TestLog(t *testing.T) {
	t.Parallel()
	j := clitest.NewGuardJob(t)
	b1, b2 := clitest.ChangesFixture(t, "batch-1.jsonl"), clitest.ChangesFixture(t, "batch-2.jsonl")
	first := j.Apply("--input", b1, "--from", "0", "--to", "10")
	j.Apply("--input", b1, "--from", "0", "--to", "10")                                  // already committed
	j.Refused("--input", b2, "--batch-id", "batch-1.jsonl", "--from", "0", "--to", "10") // changed content
	j.Refused("--input", b2, "--from", "11", "--to", "20")                               // gap
	require.Equal(t, 0, clitest.CallIdem(t, "fence", j.File).Code)
	j.Refused("--input", b2, "--from", "10", "--to", "20", "--epoch", "1") // stale epoch
	bad := j.Input("bad.jsonl", `{"change_id":"x"`)
	before := clitest.CaptureState(t, j.DB)
	require.Equal(t, report.ExitFailure, j.Run("--input", bad, "--from", "10", "--to", "20").Code)
	require.Equal(t, before, clitest.CaptureState(t, j.DB), "a failed run changed the database")
	second := j.Apply("--input", b2, "--from", "10", "--to", "20", "--epoch", "2")

	runs := j.Log()
	type row struct {
		Batch, Decision string
		Changed         []string
		RowsIn          any
		Snapshot        int64
		Cursor, Epoch   int64
	}
	var got []row
	for _, e := range runs {
		r := row{Decision: e.Decision, Changed: e.Changed, Snapshot: e.Snapshot, Cursor: e.Cursor, Epoch: e.Epoch}
		if e.BatchID != nil {
			r.Batch = *e.BatchID
		}
		if e.RowsIn != nil {
			r.RowsIn = *e.RowsIn
		}
		got = append(got, r)
	}
	in := []string{"input"}
	require.Equal(t, []row{
		{"batch-2.jsonl", "applied", in, second.RowsIn, 2, 20, 2},
		{"bad.jsonl", "failed", in, nil, 1, 10, 2},
		{"batch-2.jsonl", "refused", in, nil, 1, 10, 2},
		{"", "fenced", []string{}, nil, 1, 10, 2},
		{"batch-2.jsonl", "refused", in, nil, 1, 10, 1},
		{"batch-1.jsonl", "refused", in, nil, 1, 10, 1},
		{"batch-1.jsonl", "already_committed", []string{}, first.RowsIn, 1, 10, 1},
		{"batch-1.jsonl", "applied", []string{}, first.RowsIn, 1, 10, 1},
	}, got)
	require.Equal(t, second.Outcomes, runs[0].Outcomes)
	require.Equal(t, first.Outcomes, runs[6].Outcomes, "already_committed carries the batch's counts")
	require.Equal(t, first.Outcomes, runs[7].Outcomes)
	require.Contains(t, *runs[1].Message, "malformed JSON")
	require.Contains(t, *runs[2].Message, "stale writer")
	require.Contains(t, *runs[4].Message, "a gap")
	for i, e := range runs {
		require.Equal(t, "UTC", e.Time.Location().String())
		if i > 0 {
			require.False(t, e.Time.After(runs[i-1].Time), "run %d is newer than run %d", i, i-1)
		}
	}

	// The log is read-only: reading it changes nothing.
	before = clitest.CaptureState(t, j.DB)
	r := clitest.CallIdem(t, "log", j.File)
	require.Equal(t, 0, r.Code, r.Stderr)
	require.Equal(t, before, clitest.CaptureState(t, j.DB))
	lines := strings.Split(strings.TrimRight(r.Stdout, "\n"), "\n")
	require.Len(t, lines, 1+len(runs))
	require.Regexp(t, `^TIME\s+BATCH\s+DECISION\s+CHANGED\s+ROWS IN\s+OUTCOMES\s+SNAPSHOT\s+CURSOR\s+EPOCH\s+REASON$`, lines[0])
	require.Regexp(t, `^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\s+batch-2\.jsonl\s+applied\s+input\s+8\s+accepted=3 conflict=3 duplicate=1 superseded_in_batch=1\s+2\s+20\s+2$`, lines[1])
	require.Regexp(t, `\s+batch-1\.jsonl\s+already_committed\s+-?\s*15\s+accepted=5 `, lines[7])
	require.Contains(t, lines[4], "fenced")
}

// A refresh job's skipped runs are logged too.
func TestLogRecordsSkippedRuns(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	input := filepath.Join(clitest.RepoRoot(t), "fixtures", "sample", "occurrences-a.csv")
	job := filepath.Join(dir, "sample.toml")
	clitest.WriteText(t, job, fmt.Sprintf(`name = "sample"
pipeline = "sample"
transform_version = 1
schema_version = 1
database = %q

[input]
path = %q

[target]
table = "occurrence_sample"

[params]
cap = 1000
licenses = ["CC0 1.0", "CC BY 4.0"]
`, filepath.Join(dir, "idem.duckdb"), input))
	for _, want := range []string{"loaded", "skipped", "skipped"} {
		r := clitest.CallIdem(t, "run", job, "--json")
		require.Equal(t, 0, r.Code, r.Stderr)
		var res run.Result
		require.NoError(t, json.Unmarshal([]byte(r.Stdout), &res))
		require.Equal(t, want, res.Decision)
	}
	r := clitest.CallIdem(t, "log", job, "--json")
	require.Equal(t, 0, r.Code, r.Stderr)
	var out struct{ Runs []catalog.LogEntry }
	require.NoError(t, json.Unmarshal([]byte(r.Stdout), &out))
	var decisions []string
	for _, e := range out.Runs {
		decisions = append(decisions, e.Decision)
		require.Equal(t, int64(1), e.Snapshot)
	}
	require.Equal(t, []string{"skipped", "skipped", "loaded"}, decisions)
}

// A run whose context is already canceled (Ctrl-C before or while it opens
// the database) says nothing was committed and exits 1.
func TestCanceledBeforeTheRunStarts(t *testing.T) {
	t.Parallel()
	j := clitest.NewGuardJob(t)
	j.Apply("--input", clitest.ChangesFixture(t, "batch-1.jsonl"))
	before := clitest.CaptureState(t, j.DB)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var out, errb strings.Builder
	code := cli.Main(ctx, []string{"run", j.File, "--input", clitest.ChangesFixture(t, "batch-2.jsonl")}, &out, &errb)
	require.Equal(t, report.ExitFailure, code, errb.String())
	require.Contains(t, errb.String(), "idem: canceled, nothing was committed")
	require.Empty(t, out.String())
	require.Equal(t, before, clitest.CaptureState(t, j.DB))
}
