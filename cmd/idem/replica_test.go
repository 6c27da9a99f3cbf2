package main

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

	"github.com/idem-dev/idem/internal/job"
	"github.com/idem-dev/idem/internal/ops"
	"github.com/idem-dev/idem/internal/run"

	"github.com/stretchr/testify/require"
)

// replicaPayload is a value only the erased subject's rows carry.
const replicaPayload = "PAYLOAD-7f3a9c-only-in-subject-9"

// newReplicaJob is a versioned_changes job with [duckdb] read_replica on
// and three batches in its folder: b1 (account-1, subject-9 carrying
// replicaPayload), b2 and b3 (account-1 again, account-2).
func newReplicaJob(t *testing.T) *guardJob {
	t.Helper()
	j := newGuardJob(t)
	text, err := os.ReadFile(j.file)
	require.NoError(t, err)
	writeText(t, j.file, strings.Replace(string(text), "[duckdb]\n", "[duckdb]\nread_replica = true\n", 1))
	line := func(id, entity string, version int, value string) string {
		return fmt.Sprintf(`{"change_id":%q,"entity_id":%q,"source_version":%d,"operation":"upsert","value":%q}`, id, entity, version, value)
	}
	j.input("b1.jsonl", line("c-1", "account-1", 1, "bronze"), line("c-2", "subject-9", 1, replicaPayload))
	j.input("b2.jsonl", line("c-3", "account-1", 2, "silver"))
	j.input("b3.jsonl", line("c-4", "account-1", 3, "gold"), line("c-5", "account-2", 1, "iron"))
	return j
}

var replicaFixture once[*guardJob]

// appliedReplicaJob is newReplicaJob after clean runs of b1 and b2, a copy of
// a fixture made once per package run.
func appliedReplicaJob(t *testing.T) *guardJob {
	t.Helper()
	return replicaFixture.get(t, func(t *testing.T) *guardJob {
		j := newReplicaJob(t)
		j.apply("--input", filepath.Join(j.dir, "b1.jsonl"))
		j.apply("--input", filepath.Join(j.dir, "b2.jsonl"))
		f := guardJobAt(t, fixtureDir(t, "replica"))
		copyDir(t, j.dir, f.dir)
		return f
	}).copy(t)
}

func (j *guardJob) replica() string { return run.ReplicaPath(j.db) }

// replicaSnapshot is the snapshot the replica records for the job, after
// requiring that it is the job's snapshot in the replica's own idem.jobs
// (the record and the rows are of one commit).
func replicaSnapshot(t *testing.T, replica string) int64 {
	t.Helper()
	rows, err := ops.Query(context.Background(), replica, `SELECT r.snapshot, j.snapshot FROM idem_replica.snapshots r JOIN idem.jobs j USING (job) WHERE job = '`+applyJobName+`'`, run.OpenOptions{})
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
	res := j.apply("--input", filepath.Join(j.dir, "b1.jsonl"))
	require.NotNil(t, res.Replica, "run --json reports the replica")
	require.Empty(t, res.Replica.Error)
	require.Equal(t, j.replica(), res.Replica.Path)
	require.Positive(t, res.Replica.Bytes)
	require.Contains(t, []string{"clone", "copy"}, res.Replica.Method)
	j.apply("--input", filepath.Join(j.dir, "b2.jsonl"))
	require.Equal(t, int64(2), replicaSnapshot(t, j.replica()))
	before := captureState(t, j.db)
	require.Equal(t, before, replicaState(t, j.replica()))

	// The writer: a run of b3 held before its COMMIT.
	writer := startBlocked(t, "", "before_commit", "run", j.file, "--input", filepath.Join(j.dir, "b3.jsonl"), "--json")

	// The query reads the replica rather than wait for the writer (it
	// would wait until the writer is released: within fails it first).
	r := within(t, time.Minute, func() cliResult {
		return callIdem(t, "query", "--db", j.db, "--format", "json", "SELECT entity_id, value FROM customer_state ORDER BY entity_id")
	})
	require.Equal(t, 0, r.code, r.stderr)
	require.JSONEq(t, `[{"entity_id":"account-1","value":"silver"},{"entity_id":"subject-9","value":"`+replicaPayload+`"}]`, r.stdout)
	require.Contains(t, r.stderr, "is held by a writer; reading its read replica "+j.replica())
	require.Contains(t, r.stderr, "customer_state snapshot 2")

	r = callIdem(t, "query", "--primary", "--db", j.db, "SELECT 1")
	require.Equal(t, job.ExitLocked, r.code, r.stderr)
	require.Contains(t, r.stderr, "held by another writer")

	out := filepath.Join(j.dir, "s1.csv")
	r = callIdem(t, "export", j.file, "--snapshot", "1", "--out", out, "--json")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stderr, "reading its read replica")
	var ex ops.ExportResult
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &ex))
	require.Equal(t, int64(2), ex.Rows)
	r = callIdem(t, "diff", j.file, "--from", "1", "--to", "2")
	require.Equal(t, 0, r.code, r.stderr)
	for _, args := range [][]string{
		{"export", j.file, "--out", filepath.Join(j.dir, "latest.csv")}, // the latest is being written
		{"export", j.file, "--snapshot", "3", "--out", filepath.Join(j.dir, "s3.csv")},
		{"diff", j.file, "--from", "2", "--to", "3"},
	} {
		r = callIdem(t, args...)
		require.Equal(t, job.ExitLocked, r.code, "%v: %s", args, r.stderr)
	}
	// Any DuckDB client reads the replica meanwhile.
	require.Equal(t, []string{"silver", replicaPayload}, queryStrs(t, j.replica(),
		`SELECT value FROM customer_state ORDER BY entity_id`))

	code, stdout, stderr := writer.wait(t)
	require.Equal(t, 0, code, "the writer failed: %s", stderr)
	var after run.Result
	require.NoError(t, json.Unmarshal([]byte(stdout), &after))
	require.Equal(t, int64(3), after.Snapshot)
	require.NotNil(t, after.Replica)
	require.Empty(t, after.Replica.Error)
	require.Equal(t, int64(3), replicaSnapshot(t, j.replica()))
	require.Equal(t, captureState(t, j.db), replicaState(t, j.replica()))
	require.Equal(t, []int64{0}, queryInts(t, j.db, `SELECT count(*) FROM duckdb_schemas() WHERE schema_name = 'idem_replica'`),
		"publishing wrote into the database")

	// With the writer gone, query reads the database itself.
	r = callIdem(t, "query", "--db", j.db, "SELECT count(*) AS n FROM customer_state")
	require.Equal(t, 0, r.code, r.stderr)
	require.NotContains(t, r.stderr, "replica")
}

// TestReplicaErase: the erased subject's payload is in the replica's bytes
// before the erasure and nowhere in them after erase returns (nor after
// the next run), and the replica holds the erasure's snapshot.
func TestReplicaErase(t *testing.T) {
	t.Parallel()
	j := appliedReplicaJob(t)
	holds := func() bool {
		b, err := os.ReadFile(j.replica())
		require.NoError(t, err)
		return bytes.Contains(b, []byte(replicaPayload))
	}
	require.True(t, holds(), "the payload is in the replica before the erasure")

	r := callIdem(t, "erase", j.file, "--key", "subject-9", "--json")
	require.Equal(t, 0, r.code, r.stderr)
	var er ops.EraseResult
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &er))
	require.NotNil(t, er.Replica)
	require.Empty(t, er.Replica.Error)
	require.Equal(t, "rewrite", er.Replica.Method)
	require.Equal(t, er.Snapshot, replicaSnapshot(t, j.replica()))
	require.False(t, holds(), "the replica file holds the erased payload")
	r = callIdem(t, "query", "--db", j.replica(), `SELECT (SELECT count(*) FROM customer_state WHERE entity_id = 'subject-9') + (SELECT count(*) FROM customer_state_outcomes WHERE entity_id = 'subject-9') + (SELECT count(*) FROM idem.customer_state__history WHERE entity_id = 'subject-9') AS n`)
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "n\n0\n")
	require.Equal(t, captureState(t, j.db), replicaState(t, j.replica()))

	j.apply("--input", filepath.Join(j.dir, "b3.jsonl"))
	require.Equal(t, int64(4), replicaSnapshot(t, j.replica()))
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
		args   func(j *guardJob) []string
		points []string
	}
	steps := []step{
		{"run", func(j *guardJob) []string {
			return []string{"run", j.file, "--input", filepath.Join(j.dir, "b3.jsonl")}
		},
			[]string{run.FaultAfterCheckpoint, run.FaultReplicaBeforeRename, run.FaultReplicaAfterRename}},
		{"erase", func(j *guardJob) []string { return []string{"erase", j.file, "--key", "subject-9"} },
			[]string{run.FaultBeforeCommit, run.FaultAfterCommit, run.FaultReplicaBeforeRename, run.FaultReplicaAfterRename}},
		{"rollback", func(j *guardJob) []string { return []string{"rollback", j.file, "--to-snapshot", "1"} },
			[]string{run.FaultAfterCheckpoint, run.FaultReplicaBeforeRename}},
	}
	for _, st := range steps {
		for _, point := range st.points {
			t.Run(st.name+"/"+point, func(t *testing.T) {
				t.Parallel()
				j := appliedReplicaJob(t)
				old := captureState(t, j.db)
				r := killCLI(t, j.dir, point, 0, st.args(j)...)
				require.True(t, r.killed, "not killed at %s: %d %s", point, r.code, r.stderr)
				now := captureState(t, j.db)
				committed := !statesEqual(old, now)

				_, err := os.Stat(j.replica())
				switch {
				case err != nil:
					// Only an erasure withdraws the replica, before its commit.
					require.Equal(t, "erase", st.name, "the replica is gone")
				default:
					got := replicaState(t, j.replica())
					require.True(t, statesEqual(got, old) || statesEqual(got, now), "the replica holds neither the state before nor after")
					replicaSnapshot(t, j.replica())
					if st.name == "erase" && committed {
						b, err := os.ReadFile(j.replica())
						require.NoError(t, err)
						require.NotContains(t, string(b), replicaPayload, "a replica holds the erased subject after the erasure committed")
					}
				}

				// The next writable command publishes the missing replica.
				r2 := j.run("--input", filepath.Join(j.dir, "b2.jsonl")) // already committed: no commit of its own
				require.Equal(t, 0, r2.code, r2.stderr)
				require.Equal(t, captureState(t, j.db), replicaState(t, j.replica()))
				leftovers, err := filepath.Glob(j.replica() + ".tmp-*")
				require.NoError(t, err)
				require.Empty(t, leftovers)
			})
		}
	}
}

// replicaState is captureState of a replica without its own record
// (idem_replica.snapshots): what it holds of the database.
func replicaState(t *testing.T, path string) dbState {
	t.Helper()
	st := captureState(t, path)
	require.Contains(t, st, `"idem_replica"."snapshots"`, "the replica records what it holds")
	delete(st, `"idem_replica"."snapshots"`)
	return st
}

// statesEqual compares two captured states.
func statesEqual(a, b dbState) bool {
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
