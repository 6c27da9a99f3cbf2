package datatest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/idem-dev/idem/internal/report"

	"github.com/idem-dev/idem/cmd/idem/cli/internal/clitest"
	"github.com/stretchr/testify/require"
)

// exportAll exports every snapshot of the job (CSV) and returns the
// sha256 of each, by snapshot.
func exportAll(t *testing.T, j *clitest.GuardJob) map[int64]string {
	t.Helper()
	latest, _, _ := j.State()
	results, _ := clitest.ExportSnapshots(t, j.DB, j.File, "", latest)
	sums := map[int64]string{}
	for s, res := range results {
		sums[s] = res.SHA256
	}
	return sums
}

func commitPoint(t *testing.T, j *clitest.GuardJob) string {
	t.Helper()
	return fmt.Sprint(j.Query(`SELECT db_id, (SELECT max(seq) FROM idem.commits) FROM idem.commits WHERE seq = 0`))
}

// TestCompact: compact keeps every table (idem's own and the target's) and
// every snapshot's export byte for byte, gives the erased subject's bytes
// and the freed space back, and the job goes on from the compacted file.
func TestCompact(t *testing.T) {
	t.Parallel()
	j := clitest.CompactJob(t)
	before, sums, commits := clitest.CaptureState(t, j.DB), exportAll(t, j), commitPoint(t, j)
	st, err := os.Stat(j.DB)
	require.NoError(t, err)
	require.True(t, clitest.FileHolds(t, j.DB, clitest.SecretPayload), "the test needs the erased payload in the file's free blocks before compact")

	res := clitest.CompactOK(t, j.DB)
	require.Equal(t, st.Size(), res.BytesBefore)
	require.Less(t, res.BytesAfter, res.BytesBefore, "compact gives space back")
	require.Len(t, res.Jobs, 1)
	require.Equal(t, sums[int64(len(sums))], res.Jobs[0].SHA256, "the export compact checked is the latest snapshot's")
	st, err = os.Stat(j.DB)
	require.NoError(t, err)
	require.Equal(t, res.BytesAfter, st.Size())

	require.Equal(t, before, clitest.CaptureState(t, j.DB), "compact changed a table")
	require.Equal(t, sums, exportAll(t, j), "compact changed a snapshot's export")
	require.Equal(t, commits, commitPoint(t, j), "compact changed the database's id or commit sequence")
	require.False(t, clitest.FileHolds(t, j.DB, clitest.SecretPayload), "the erased payload survives compact in the database file")
	left, err := filepath.Glob(j.DB + ".*")
	require.NoError(t, err)
	require.Equal(t, []string{j.DB + ".erasures", j.DB + ".inputs", j.DB + ".verdicts-key"}, left, "compact leaves nothing beside the database but the erasure journal, the inputs and the verdict secret")

	// The job goes on: a replayed batch is already committed, a new one
	// applies, and rerun reproduces every snapshot from the new file.
	require.Equal(t, "already_committed", j.Apply("--input", clitest.ChangesFixture(t, "batch-2.jsonl")).Decision)
	require.Equal(t, "applied", j.Apply("--input", clitest.ChangesFixture(t, "batch-3.jsonl")).Decision)
	r := clitest.CallIdem(t, "rerun", j.File, "--json")
	require.Equal(t, 0, r.Code, r.Stderr)
	require.Contains(t, r.Stdout, `"reproduced":true`)
}

// TestCompactKeepsEveryObject: objects a pipeline may create beside its
// tables (a sequence in use, a default drawing from it, an index, a view,
// an enum type, a macro, comments, a primary key) come through compact
// exactly, and the sequence goes on where it was.
func TestCompactKeepsEveryObject(t *testing.T) {
	t.Parallel()
	j := clitest.AppliedGuardJob(t)
	ctx := context.Background()
	db := clitest.RawDB(t, j.DB)
	for _, s := range []string{
		"CREATE SCHEMA extra",
		"CREATE SEQUENCE extra.seq START 5",
		"CREATE TYPE extra.mood AS ENUM ('calm', 'busy')",
		"CREATE TABLE extra.t (id INTEGER PRIMARY KEY, n BIGINT DEFAULT nextval('extra.seq'), m extra.mood, d DECIMAL(18,3), l INTEGER[], s STRUCT(a INTEGER), CHECK (id > 0))",
		"INSERT INTO extra.t (id, m, d, l, s) SELECT i, 'calm', i / 7, [i, i], {'a': i} FROM range(1, 3000) r(i)",
		"DELETE FROM extra.t WHERE id > 100",
		"CREATE INDEX t_n ON extra.t (n)",
		"CREATE VIEW extra.v AS SELECT id, n FROM extra.t WHERE m = 'calm'",
		"CREATE MACRO extra.plus_one(a) AS a + 1",
		"COMMENT ON TABLE extra.t IS 'kept'",
		"COMMENT ON COLUMN extra.t.d IS 'three places'",
	} {
		_, err := db.ExecContext(ctx, s)
		require.NoError(t, err, s)
	}
	require.NoError(t, db.Close())
	objects := `SELECT schema_name || '.' || table_name || ' ' || sql || coalesce(comment, '') FROM duckdb_tables() WHERE database_name = current_database()
		UNION ALL SELECT view_name || ' ' || sql FROM duckdb_views() WHERE database_name = current_database() AND NOT internal
		UNION ALL SELECT sequence_name || ' ' || sql FROM duckdb_sequences() WHERE database_name = current_database()
		UNION ALL SELECT index_name || ' ' || sql FROM duckdb_indexes() WHERE database_name = current_database()
		UNION ALL SELECT type_name || ' ' || logical_type FROM duckdb_types() WHERE database_name = current_database() AND NOT internal
		UNION ALL SELECT function_name || ' ' || macro_definition FROM duckdb_functions() WHERE database_name = current_database() AND function_type = 'macro' AND NOT internal
		UNION ALL SELECT column_name || ' ' || comment FROM duckdb_columns() WHERE database_name = current_database() AND comment IS NOT NULL
		ORDER BY 1`
	wantObjects, want := strs(j.Query(objects)), clitest.CaptureState(t, j.DB)
	for _, o := range []string{"mood ENUM", "plus_one (a + 1)", "d three places", "t_n CREATE INDEX t_n ON extra.t(n);"} {
		require.Contains(t, wantObjects, o)
	}

	res := clitest.CompactOK(t, j.DB)
	require.Greater(t, res.Tables, 1)
	require.Equal(t, wantObjects, strs(j.Query(objects)))
	require.Equal(t, want, clitest.CaptureState(t, j.DB))
	db = clitest.RawDB(t, j.DB)
	defer db.Close()
	var next, id int64
	require.NoError(t, db.QueryRowContext(ctx, "INSERT INTO extra.t (id, m) VALUES (5000, 'busy') RETURNING n, id").Scan(&next, &id))
	require.Equal(t, int64(5+2999), next, "the sequence gives the value it would have given before compact")
	var plus int64
	require.NoError(t, db.QueryRowContext(ctx, "SELECT extra.plus_one(41)").Scan(&plus))
	require.Equal(t, int64(42), plus)
	_, err := db.ExecContext(ctx, "INSERT INTO extra.t (id, m) VALUES (1, 'busy')")
	require.ErrorContains(t, err, "violates primary key constraint", "the primary key still holds")
}

// TestCompactSize: after rows are deleted (as expiry does: old history
// versions and outcomes of old batches) the file does not shrink, compact
// makes it smaller. The figures are logged.
func TestCompactSize(t *testing.T) {
	t.Parallel()
	j := clitest.NewGuardJob(t)
	for b := range 4 {
		var lines []string
		for i := range 5000 {
			lines = append(lines, fmt.Sprintf(`{"change_id":"b%d-%d","entity_id":"e-%d","source_version":%d,"operation":"upsert","value":"value %d of batch %d %s"}`, b, i, i, b+1, i, b, strings.Repeat("z", b+10)))
		}
		j.Apply("--input", j.Input(fmt.Sprintf("b%d.jsonl", b), lines...))
	}
	size := func() int64 {
		st, err := os.Stat(j.DB)
		require.NoError(t, err)
		return st.Size()
	}
	full := size()
	// Expire by hand: keep the history of the last snapshot only and the
	// outcomes of its batch.
	db := clitest.RawDB(t, j.DB)
	for _, s := range []string{
		`DELETE FROM idem."customer_state__history" WHERE idem_to IS NOT NULL`,
		`DELETE FROM customer_state_outcomes WHERE batch_id <> (SELECT batch_id FROM idem.ledger ORDER BY snapshot DESC LIMIT 1)`,
		`CHECKPOINT`,
	} {
		_, err := db.Exec(s)
		require.NoError(t, err, s)
	}
	require.NoError(t, db.Close())
	deleted := size()
	want := clitest.CaptureState(t, j.DB)
	res := clitest.CompactOK(t, j.DB)
	require.Equal(t, want, clitest.CaptureState(t, j.DB))
	require.Equal(t, deleted, res.BytesBefore)
	require.Less(t, float64(res.BytesAfter), 0.8*float64(deleted), "compact gives back the space of the deleted rows")
	t.Logf("4 batches of 5,000 changes: %d bytes; after deleting old history and outcomes: %d bytes; after compact: %d bytes (%.1f s)",
		full, deleted, res.BytesAfter, res.Seconds)
}

// TestCompactAndBackupUsage: each needs its flags (exit 2), a missing
// database is not created, and a non-empty backup folder is refused.
func TestCompactAndBackupUsage(t *testing.T) {
	t.Parallel()
	j := clitest.AppliedGuardJob(t)
	full := filepath.Join(j.Dir, "full")
	clitest.WriteFile(t, filepath.Join(full, "something"), "x")
	for _, tc := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"compact"}, report.ExitUsage, "compact needs --db PATH"},
		{[]string{"backup", "--db", j.DB}, report.ExitUsage, "backup needs --db PATH and --out DIR"},
		{[]string{"backup", "--out", full}, report.ExitUsage, "backup needs --db PATH and --out DIR"},
		{[]string{"backup", "--db", j.DB, "--out", full}, report.ExitUsage, "is not empty"},
		{[]string{"backup", "--db", j.DB, "--out", j.File}, report.ExitUsage, "is not a folder"},
		{[]string{"backup", "--db", j.DB, "--out", filepath.Join(j.Dir, "no", "such")}, report.ExitUsage, "does not exist"},
		{[]string{"backup", "--verify", full, "--db", j.DB}, report.ExitUsage, "takes no --db"},
		{[]string{"backup", "--verify", full}, report.ExitFailure, "not a complete backup"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			before := clitest.CaptureState(t, j.DB)
			r := clitest.CallIdem(t, tc.args...)
			require.Equal(t, tc.code, r.Code, r.Stderr)
			require.Contains(t, r.Stderr, tc.msg)
			require.Equal(t, before, clitest.CaptureState(t, j.DB))
		})
	}
	entries, err := os.ReadDir(full)
	require.NoError(t, err)
	require.Len(t, entries, 1, "a refused backup wrote into the folder")
	missing := filepath.Join(j.Dir, "missing.duckdb")
	for _, args := range [][]string{{"compact", "--db", missing}, {"backup", "--db", missing, "--out", filepath.Join(j.Dir, "b")}} {
		r := clitest.CallIdem(t, args...)
		require.Equal(t, report.ExitUsage, r.Code, r.Stderr)
		require.Contains(t, r.Stderr, "no database "+missing)
		_, err = os.Stat(missing)
		require.True(t, os.IsNotExist(err), "%s created a database", args[0])
	}
	require.NoDirExists(t, filepath.Join(j.Dir, "b"))
}

// strs is the first column of rows as text.
func strs(rows [][]any) []string {
	out := make([]string, len(rows))
	for i, r := range rows {
		out[i] = fmt.Sprint(r[0])
	}
	return out
}
