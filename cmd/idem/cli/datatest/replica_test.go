package datatest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/idem-dev/idem/internal/report"
	"github.com/idem-dev/idem/internal/run"

	"github.com/idem-dev/idem/cmd/idem/cli/internal/clitest"
	"github.com/idem-dev/idem/internal/export"
	"github.com/idem-dev/idem/internal/history"
	"github.com/idem-dev/idem/internal/inspect"
	"github.com/stretchr/testify/require"
)

// replicaPayload is a value only the erased subject's rows carry.
const replicaPayload = "PAYLOAD-7f3a9c-only-in-subject-9"

// newReplicaJob is a versioned_changes job with [duckdb] read_replica on
// and three batches in its folder: b1 (account-1, subject-9 carrying
// replicaPayload), b2 and b3 (account-1 again, account-2).
func newReplicaJob(t *testing.T) *clitest.GuardJob {
	t.Helper()
	j := clitest.NewGuardJob(t)
	text, err := os.ReadFile(j.File)
	require.NoError(t, err)
	clitest.WriteText(t, j.File, strings.Replace(string(text), "[duckdb]\n", "[duckdb]\nread_replica = true\n", 1))
	line := func(id, entity string, version int, value string) string {
		return fmt.Sprintf(`{"change_id":%q,"entity_id":%q,"source_version":%d,"operation":"upsert","value":%q}`, id, entity, version, value)
	}
	j.Input("b1.jsonl", line("c-1", "account-1", 1, "bronze"), line("c-2", "subject-9", 1, replicaPayload))
	j.Input("b2.jsonl", line("c-3", "account-1", 2, "silver"))
	j.Input("b3.jsonl", line("c-4", "account-1", 3, "gold"), line("c-5", "account-2", 1, "iron"))
	return j
}

var replicaFixture clitest.Once[*clitest.GuardJob]

// appliedReplicaJob is newReplicaJob after clean runs of b1 and b2, a copy of
// a fixture made once per package run.
func appliedReplicaJob(t *testing.T) *clitest.GuardJob {
	t.Helper()
	return replicaFixture.Get(t, func(t *testing.T) *clitest.GuardJob {
		j := newReplicaJob(t)
		j.Apply("--input", filepath.Join(j.Dir, "b1.jsonl"))
		j.Apply("--input", filepath.Join(j.Dir, "b2.jsonl"))
		f := clitest.GuardJobAt(t, clitest.FixtureDir(t, "replica"))
		clitest.CopyDir(t, j.Dir, f.Dir)
		return f
	}).Copy(t)
}

// replicaSnapshot is the snapshot the replica records for the job, after
// requiring that it is the job's snapshot in the replica's own idem.jobs
// (the record and the rows are of one commit).
func replicaSnapshot(t *testing.T, replica string) int64 {
	t.Helper()
	rows, err := inspect.Query(context.Background(), replica, `SELECT r.snapshot, j.snapshot FROM idem_replica.snapshots r JOIN idem.jobs j USING (job) WHERE job = '`+clitest.ApplyJobName+`'`, run.OpenOptions{})
	require.NoError(t, err)
	require.Len(t, rows.Values, 1)
	require.Equal(t, rows.Values[0][1], rows.Values[0][0], "the replica's record and its rows disagree")
	return rows.Values[0][0].(int64)
}

// TestReplicaReadDuringWrite: while a run holds the database (held before
// COMMIT in another process by IDEM_FAULT=block:before_commit), idem query
// reads the replica, without waiting for the writer, with exit 0 and the previous snapshot's rows, stderr naming the replica;
// --primary still fails with exit 4; export and diff read the replica for
// the snapshots it holds and fail with exit 4 for the one being written; a
// plain duckdb-go client opens the replica read-only. After the run the
// replica holds the new snapshot, table for table equal to the database,
// and the database holds no trace of the publication.
func TestReplicaReadDuringWrite(t *testing.T) {
	t.Parallel()
	j := newReplicaJob(t)
	res := j.Apply("--input", filepath.Join(j.Dir, "b1.jsonl"))
	require.NotNil(t, res.Replica, "run --json reports the replica")
	require.Empty(t, res.Replica.Error)
	require.Equal(t, j.Replica(), res.Replica.Path)
	require.Positive(t, res.Replica.Bytes)
	require.Contains(t, []string{"clone", "copy"}, res.Replica.Method)
	j.Apply("--input", filepath.Join(j.Dir, "b2.jsonl"))
	require.Equal(t, int64(2), replicaSnapshot(t, j.Replica()))
	before := clitest.CaptureState(t, j.DB)
	require.Equal(t, before, replicaState(t, j.Replica()))

	// The writer: a run of b3 held before its COMMIT.
	writer := clitest.StartBlocked(t, "", "before_commit", "run", j.File, "--input", filepath.Join(j.Dir, "b3.jsonl"), "--json")

	// The query reads the replica rather than wait for the writer (it
	// would wait until the writer is released: within fails it first).
	r := within(t, time.Minute, func() clitest.CLIResult {
		return clitest.CallIdem(t, "query", "--db", j.DB, "--format", "json", "SELECT entity_id, value FROM customer_state ORDER BY entity_id")
	})
	require.Equal(t, 0, r.Code, r.Stderr)
	require.JSONEq(t, `[{"entity_id":"account-1","value":"silver"},{"entity_id":"subject-9","value":"`+replicaPayload+`"}]`, r.Stdout)
	require.Contains(t, r.Stderr, "is held by a writer; reading its read replica "+j.Replica())
	require.Contains(t, r.Stderr, "customer_state snapshot 2")

	r = clitest.CallIdem(t, "query", "--primary", "--db", j.DB, "SELECT 1")
	require.Equal(t, report.ExitLocked, r.Code, r.Stderr)
	require.Contains(t, r.Stderr, "held by another writer")

	out := filepath.Join(j.Dir, "s1.csv")
	r = clitest.CallIdem(t, "export", j.File, "--snapshot", "1", "--out", out, "--json")
	require.Equal(t, 0, r.Code, r.Stderr)
	require.Contains(t, r.Stderr, "reading its read replica")
	var ex export.Result
	require.NoError(t, json.Unmarshal([]byte(r.Stdout), &ex))
	require.Equal(t, int64(2), ex.Rows)
	r = clitest.CallIdem(t, "diff", j.File, "--from", "1", "--to", "2")
	require.Equal(t, 0, r.Code, r.Stderr)
	for _, args := range [][]string{
		{"export", j.File, "--out", filepath.Join(j.Dir, "latest.csv")}, // the latest is being written
		{"export", j.File, "--snapshot", "3", "--out", filepath.Join(j.Dir, "s3.csv")},
		{"diff", j.File, "--from", "2", "--to", "3"},
	} {
		r = clitest.CallIdem(t, args...)
		require.Equal(t, report.ExitLocked, r.Code, "%v: %s", args, r.Stderr)
	}
	// Any DuckDB client reads the replica meanwhile.
	require.Equal(t, []string{"silver", replicaPayload}, clitest.QueryStrs(t, j.Replica(),
		`SELECT value FROM customer_state ORDER BY entity_id`))

	code, stdout, stderr := writer.Wait(t)
	require.Equal(t, 0, code, "the writer failed: %s", stderr)
	var after run.Result
	require.NoError(t, json.Unmarshal([]byte(stdout), &after))
	require.Equal(t, int64(3), after.Snapshot)
	require.NotNil(t, after.Replica)
	require.Empty(t, after.Replica.Error)
	require.Equal(t, int64(3), replicaSnapshot(t, j.Replica()))
	require.Equal(t, clitest.CaptureState(t, j.DB), replicaState(t, j.Replica()))
	require.Equal(t, []int64{0}, clitest.QueryInts(t, j.DB, `SELECT count(*) FROM duckdb_schemas() WHERE schema_name = 'idem_replica'`),
		"publishing wrote into the database")

	// With the writer gone, query reads the database itself.
	r = clitest.CallIdem(t, "query", "--db", j.DB, "SELECT count(*) AS n FROM customer_state")
	require.Equal(t, 0, r.Code, r.Stderr)
	require.NotContains(t, r.Stderr, "replica")
}

// TestReplicaErase: the erased subject's payload is in the replica's bytes
// before the erasure and nowhere in them after erase returns (nor after
// the next run), and the replica holds the erasure's snapshot.
func TestReplicaErase(t *testing.T) {
	t.Parallel()
	j := appliedReplicaJob(t)
	holds := func() bool {
		b, err := os.ReadFile(j.Replica())
		require.NoError(t, err)
		return bytes.Contains(b, []byte(replicaPayload))
	}
	require.True(t, holds(), "the payload is in the replica before the erasure")

	r := clitest.CallIdem(t, "erase", j.File, "--key", "subject-9", "--json")
	require.Equal(t, 0, r.Code, r.Stderr)
	var er history.EraseResult
	require.NoError(t, json.Unmarshal([]byte(r.Stdout), &er))
	require.NotNil(t, er.Replica)
	require.Empty(t, er.Replica.Error)
	require.Equal(t, "rewrite", er.Replica.Method)
	require.Equal(t, er.Snapshot, replicaSnapshot(t, j.Replica()))
	require.False(t, holds(), "the replica file holds the erased payload")
	r = clitest.CallIdem(t, "query", "--db", j.Replica(), `SELECT (SELECT count(*) FROM customer_state WHERE entity_id = 'subject-9') + (SELECT count(*) FROM customer_state_outcomes WHERE entity_id = 'subject-9') + (SELECT count(*) FROM idem.customer_state__history WHERE entity_id = 'subject-9') AS n`)
	require.Equal(t, 0, r.Code, r.Stderr)
	require.Contains(t, r.Stdout, "n\n0\n")
	require.Equal(t, clitest.CaptureState(t, j.DB), replicaState(t, j.Replica()))

	j.Apply("--input", filepath.Join(j.Dir, "b3.jsonl"))
	require.Equal(t, int64(4), replicaSnapshot(t, j.Replica()))
	require.False(t, holds(), "a run after the erasure published the erased payload")
}

// TestKillReplicaPublication SIGKILLs a run, an erase and a rollback at the
// fault points of their publication (and between the commit and it). The
// replica in place is then a valid database holding one whole snapshot,
// the one before or after the command, table for table; no replica holds
// an erased subject once the erasure committed; and the next writable
// command publishes the replica of the latest commit and removes the
// killed one's temporary file.
func TestKillReplicaPublication(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("kill test runs idem as a subprocess; skipped with -short")
	}
	type step struct {
		name   string
		args   func(j *clitest.GuardJob) []string
		points []string
	}
	steps := []step{
		{"run", func(j *clitest.GuardJob) []string {
			return []string{"run", j.File, "--input", filepath.Join(j.Dir, "b3.jsonl")}
		},
			[]string{run.FaultAfterCheckpoint, run.FaultReplicaBeforeRename, run.FaultReplicaAfterRename}},
		{"erase", func(j *clitest.GuardJob) []string { return []string{"erase", j.File, "--key", "subject-9"} },
			[]string{run.FaultBeforeCommit, run.FaultAfterCommit, run.FaultReplicaBeforeRename, run.FaultReplicaAfterRename}},
		{"rollback", func(j *clitest.GuardJob) []string { return []string{"rollback", j.File, "--to-snapshot", "1"} },
			[]string{run.FaultAfterCheckpoint, run.FaultReplicaBeforeRename}},
	}
	for _, st := range steps {
		for _, point := range st.points {
			t.Run(st.name+"/"+point, func(t *testing.T) {
				t.Parallel()
				j := appliedReplicaJob(t)
				old := clitest.CaptureState(t, j.DB)
				r := clitest.KillCLI(t, j.Dir, point, 0, st.args(j)...)
				require.True(t, r.Killed, "not killed at %s: %d %s", point, r.Code, r.Stderr)
				now := clitest.CaptureState(t, j.DB)
				committed := !statesEqual(old, now)

				_, err := os.Stat(j.Replica())
				switch {
				case err != nil:
					// Only an erasure withdraws the replica, before its commit.
					require.Equal(t, "erase", st.name, "the replica is gone")
				default:
					got := replicaState(t, j.Replica())
					require.True(t, statesEqual(got, old) || statesEqual(got, now), "the replica holds neither the state before nor after")
					replicaSnapshot(t, j.Replica())
					if st.name == "erase" && committed {
						b, err := os.ReadFile(j.Replica())
						require.NoError(t, err)
						require.NotContains(t, string(b), replicaPayload, "a replica holds the erased subject after the erasure committed")
					}
				}

				// The next writable command publishes the missing replica.
				r2 := j.Run("--input", filepath.Join(j.Dir, "b2.jsonl")) // already committed: no commit of its own
				require.Equal(t, 0, r2.Code, r2.Stderr)
				require.Equal(t, clitest.CaptureState(t, j.DB), replicaState(t, j.Replica()))
				leftovers, err := filepath.Glob(j.Replica() + ".tmp-*")
				require.NoError(t, err)
				require.Empty(t, leftovers)
			})
		}
	}
}

// replicaState is CaptureState of a replica without its own record
// (idem_replica.snapshots): what it holds of the database.
func replicaState(t *testing.T, path string) clitest.DBState {
	t.Helper()
	st := clitest.CaptureState(t, path)
	require.Contains(t, st, `"idem_replica"."snapshots"`, "the replica records what it holds")
	delete(st, `"idem_replica"."snapshots"`)
	return st
}

// statesEqual compares two captured states.
func statesEqual(a, b clitest.DBState) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}
