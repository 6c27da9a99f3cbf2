package main

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/idem-dev/idem/internal/job"
	"github.com/idem-dev/idem/internal/ops"

	"github.com/stretchr/testify/require"
)

// secretPayload is the value the erased subject carries in compactJob.
// Every value of that batch is random text like it, which DuckDB stores
// uncompressed, so a byte search of the file finds the payload as long as
// any block holds it.
var secretPayload = randomText(rand.New(rand.NewPCG(9, 9)), 48)

// randomText is n characters drawn from 88 printable ones: text no string
// compression shortens.
func randomText(rng *rand.Rand, n int) string {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789!#$%&()*+,-./:;<=>?@[]^_{|}~"
	b := make([]byte, n)
	for i := range b {
		b[i] = alphabet[rng.IntN(len(alphabet))]
	}
	return string(b)
}

// compactJob is a versioned_changes job with three batches and history,
// and a subject ("subject-9", whose value is secretPayload) erased after
// them: its rows were in the target, history, outcomes and retained
// inputs, and the erasure left their bytes in the file's free blocks. It
// is a copy of a fixture made once per package run.
func compactJob(t *testing.T) *guardJob {
	t.Helper()
	return compactFixture.get(t, func(t *testing.T) *guardJob {
		j := newGuardJob(t)
		j.apply()
		var lines []string
		rng := rand.New(rand.NewPCG(1, 2))
		for i := range 400 {
			lines = append(lines, fmt.Sprintf(`{"change_id":"p-%d","entity_id":"bulk-%d","source_version":1,"operation":"upsert","value":%q}`, i, i, randomText(rng, 48)))
		}
		lines = append(lines, `{"change_id":"s-1","entity_id":"subject-9","source_version":1,"operation":"upsert","value":"`+secretPayload+`"}`)
		j.apply("--input", j.input("bulk.jsonl", lines...))
		require.True(t, fileHolds(t, j.db, secretPayload), "the test needs the payload stored as plain bytes")
		j.apply("--input", changesFixture(t, "batch-2.jsonl"))
		r := callIdem(t, "erase", j.file, "--key", "subject-9", "--json")
		require.Equal(t, 0, r.code, r.stderr)
		f := guardJobAt(t, fixtureDir(t, "compact"))
		copyDir(t, j.dir, f.dir)
		return f
	}).copy(t)
}

var compactFixture once[*guardJob]

// fileHolds reports whether the file at path holds the bytes of s.
func fileHolds(t *testing.T, path, s string) bool {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return bytes.Contains(b, []byte(s))
}

// exportAll exports every snapshot of the job (CSV) and returns the
// sha256 of each, by snapshot.
func exportAll(t *testing.T, j *guardJob) map[int64]string {
	t.Helper()
	latest, _, _ := j.state()
	results, _ := exportSnapshots(t, j.db, j.file, "", latest)
	sums := map[int64]string{}
	for s, res := range results {
		sums[s] = res.SHA256
	}
	return sums
}

func commitPoint(t *testing.T, j *guardJob) string {
	t.Helper()
	return fmt.Sprint(j.query(`SELECT db_id, (SELECT max(seq) FROM idem.commits) FROM idem.commits WHERE seq = 0`))
}

// rawDB opens the database file at path in DuckDB without idem, attached
// under another name (a file named idem.duckdb would make the schema name
// idem ambiguous), for tests that change it behind idem's back.
func rawDB(t *testing.T, path string) *sql.DB {
	t.Helper()
	db, err := sql.Open("duckdb", "")
	require.NoError(t, err)
	db.SetMaxOpenConns(1)
	_, err = db.Exec("ATTACH " + job.SQLString(path) + " AS raw; USE raw")
	require.NoError(t, err)
	return db
}

func compactOK(t *testing.T, db string) ops.CompactResult {
	t.Helper()
	r := callIdem(t, "compact", "--db", db, "--json")
	require.Equal(t, 0, r.code, "compact: %s", r.stderr)
	var res ops.CompactResult
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &res), r.stdout)
	return res
}

// TestCompact: compact keeps every table (idem's own and the target's) and
// every snapshot's export byte for byte, gives the erased subject's bytes
// and the freed space back, and the job goes on from the compacted file.
func TestCompact(t *testing.T) {
	t.Parallel()
	j := compactJob(t)
	before, sums, commits := captureState(t, j.db), exportAll(t, j), commitPoint(t, j)
	st, err := os.Stat(j.db)
	require.NoError(t, err)
	require.True(t, fileHolds(t, j.db, secretPayload), "the test needs the erased payload in the file's free blocks before compact")

	res := compactOK(t, j.db)
	require.Equal(t, st.Size(), res.BytesBefore)
	require.Less(t, res.BytesAfter, res.BytesBefore, "compact gives space back")
	require.Len(t, res.Jobs, 1)
	require.Equal(t, sums[int64(len(sums))], res.Jobs[0].SHA256, "the export compact checked is the latest snapshot's")
	st, err = os.Stat(j.db)
	require.NoError(t, err)
	require.Equal(t, res.BytesAfter, st.Size())

	require.Equal(t, before, captureState(t, j.db), "compact changed a table")
	require.Equal(t, sums, exportAll(t, j), "compact changed a snapshot's export")
	require.Equal(t, commits, commitPoint(t, j), "compact changed the database's id or commit sequence")
	require.False(t, fileHolds(t, j.db, secretPayload), "the erased payload survives compact in the database file")
	left, err := filepath.Glob(j.db + ".*")
	require.NoError(t, err)
	require.Equal(t, []string{j.db + ".inputs"}, left, "compact leaves nothing beside the database")

	// The job goes on: a replayed batch is already committed, a new one
	// applies, and rerun reproduces every snapshot from the new file.
	require.Equal(t, "already_committed", j.apply("--input", changesFixture(t, "batch-2.jsonl")).Decision)
	require.Equal(t, "applied", j.apply("--input", changesFixture(t, "batch-3.jsonl")).Decision)
	r := callIdem(t, "rerun", j.file, "--json")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, `"reproduced":true`)
}

// TestCompactKeepsEveryObject: objects a pipeline may create beside its
// tables (a sequence in use, a default drawing from it, an index, a view,
// an enum type, a macro, comments, a primary key) come through compact
// exactly, and the sequence goes on where it was.
func TestCompactKeepsEveryObject(t *testing.T) {
	t.Parallel()
	j := appliedGuardJob(t)
	ctx := context.Background()
	db := rawDB(t, j.db)
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
	wantObjects, want := strs(j.query(objects)), captureState(t, j.db)
	for _, o := range []string{"mood ENUM", "plus_one (a + 1)", "d three places", "t_n CREATE INDEX t_n ON extra.t(n);"} {
		require.Contains(t, wantObjects, o)
	}

	res := compactOK(t, j.db)
	require.Greater(t, res.Tables, 1)
	require.Equal(t, wantObjects, strs(j.query(objects)))
	require.Equal(t, want, captureState(t, j.db))
	db = rawDB(t, j.db)
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
	j := newGuardJob(t)
	for b := range 4 {
		var lines []string
		for i := range 5000 {
			lines = append(lines, fmt.Sprintf(`{"change_id":"b%d-%d","entity_id":"e-%d","source_version":%d,"operation":"upsert","value":"value %d of batch %d %s"}`, b, i, i, b+1, i, b, strings.Repeat("z", b+10)))
		}
		j.apply("--input", j.input(fmt.Sprintf("b%d.jsonl", b), lines...))
	}
	size := func() int64 {
		st, err := os.Stat(j.db)
		require.NoError(t, err)
		return st.Size()
	}
	full := size()
	// Expire by hand: keep the history of the last snapshot only and the
	// outcomes of its batch.
	db := rawDB(t, j.db)
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
	want := captureState(t, j.db)
	res := compactOK(t, j.db)
	require.Equal(t, want, captureState(t, j.db))
	require.Equal(t, deleted, res.BytesBefore)
	require.Less(t, float64(res.BytesAfter), 0.8*float64(deleted), "compact gives back the space of the deleted rows")
	t.Logf("4 batches of 5,000 changes: %d bytes; after deleting old history and outcomes: %d bytes; after compact: %d bytes (%.1f s)",
		full, deleted, res.BytesAfter, res.Seconds)
}

// TestCompactAndBackupUsage: each needs its flags (exit 2), a missing
// database is not created, and a non-empty backup folder is refused.
func TestCompactAndBackupUsage(t *testing.T) {
	t.Parallel()
	j := appliedGuardJob(t)
	full := filepath.Join(j.dir, "full")
	writeFile(t, filepath.Join(full, "something"), "x")
	for _, tc := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"compact"}, job.ExitUsage, "compact needs --db PATH"},
		{[]string{"backup", "--db", j.db}, job.ExitUsage, "backup needs --db PATH and --out DIR"},
		{[]string{"backup", "--out", full}, job.ExitUsage, "backup needs --db PATH and --out DIR"},
		{[]string{"backup", "--db", j.db, "--out", full}, job.ExitUsage, "is not empty"},
		{[]string{"backup", "--db", j.db, "--out", j.file}, job.ExitUsage, "is not a folder"},
		{[]string{"backup", "--db", j.db, "--out", filepath.Join(j.dir, "no", "such")}, job.ExitUsage, "does not exist"},
		{[]string{"backup", "--verify", full, "--db", j.db}, job.ExitUsage, "takes no --db"},
		{[]string{"backup", "--verify", full}, job.ExitFailure, "not a complete backup"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			before := captureState(t, j.db)
			r := callIdem(t, tc.args...)
			require.Equal(t, tc.code, r.code, r.stderr)
			require.Contains(t, r.stderr, tc.msg)
			require.Equal(t, before, captureState(t, j.db))
		})
	}
	entries, err := os.ReadDir(full)
	require.NoError(t, err)
	require.Len(t, entries, 1, "a refused backup wrote into the folder")
	missing := filepath.Join(j.dir, "missing.duckdb")
	for _, args := range [][]string{{"compact", "--db", missing}, {"backup", "--db", missing, "--out", filepath.Join(j.dir, "b")}} {
		r := callIdem(t, args...)
		require.Equal(t, job.ExitUsage, r.code, r.stderr)
		require.Contains(t, r.stderr, "no database "+missing)
		_, err = os.Stat(missing)
		require.True(t, os.IsNotExist(err), "%s created a database", args[0])
	}
	require.NoDirExists(t, filepath.Join(j.dir, "b"))
}

// strs is the first column of rows as text.
func strs(rows [][]any) []string {
	out := make([]string, len(rows))
	for i, r := range rows {
		out[i] = fmt.Sprint(r[0])
	}
	return out
}
