package catalog

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"

	"github.com/idem-dev/idem/internal/pipeline"
	"github.com/idem-dev/idem/internal/report"
	"github.com/stretchr/testify/require"
)

// expiryFixture is a catalog with two jobs: a, an apply job of four
// snapshots whose outcomes table t_outcomes has a batch_id column, with a
// packet per snapshot and inputs s1..s3; and c, which read s3 and s4 and
// expired below 2. d is an apply job whose state pins a's snapshot 3.
func expiryFixture(t *testing.T) *sql.DB {
	t.Helper()
	db := newCatalog(t)
	exec(t, db,
		`CREATE TABLE t_outcomes (batch_id VARCHAR, outcome VARCHAR)`,
		`INSERT INTO t_outcomes VALUES ('b1', 'accepted'), ('b1', 'stale'), ('b2', 'accepted'), ('b3', 'accepted'), ('b4', 'accepted')`,
		`INSERT INTO idem.ledger (job, batch_id, digest, input_digest, rows_in, outcomes, snapshot)
		 VALUES ('a', 'b1', 'd', 'i', 2, '{}', 1), ('a', 'b2', 'd', 'i', 1, '{}', 2), ('a', 'b3', 'd', 'i', 1, '{}', 3), ('a', 'b4', 'd', 'i', 1, '{}', 4),
		        ('c', 'b1', 'd', 'i', 9, '{}', 1)`,
		`INSERT INTO idem.inputs VALUES ('s1', 100, NULL), ('s2', 200, NULL), ('s3', 300, NULL), ('s4', 400, NULL), ('s4', 400, NULL)`,
		`INSERT INTO idem.snapshots (job, snapshot, parent, kind, inputs) VALUES
		 ('a', 1, 0, 'applied', '{"files":[{"sha256":"s1"}]}'), ('a', 2, 1, 'applied', '{"files":[{"sha256":"s2"},{"sha256":"s1"}]}'),
		 ('a', 3, 2, 'applied', '{"files":[{"sha256":"s3"}]}'), ('a', 4, 3, 'erase', '{"files":[]}'),
		 ('c', 1, 0, 'applied', '{"files":[{"sha256":"s3"}]}'), ('c', 2, 1, 'applied', '{"files":[{"sha256":"s4"}]}')`,
		// A release packet is its snapshot row's (catalog version 9).
		`UPDATE idem.snapshots SET packet = '{}' WHERE job = 'a'`,
		`INSERT INTO idem.retention VALUES ('c', 2, 2, NULL)`,
		`INSERT INTO idem.jobs (job, mode, parts) VALUES
		 ('d', 'apply', '{"input":"","upstream":[{"job":"a","snapshot":3,"job_key":"k"}]}'),
		 ('e', 'refresh', '{"input":"","upstream":[{"job":"a","snapshot":1,"job_key":"k"}]}'),
		 ('f', 'apply', '{"input":"","upstream":[{"job":"aa","snapshot":2,"job_key":"k"}]}')`,
	)
	return db
}

func TestRetention(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := expiryFixture(t)
	for _, c := range []struct {
		job  string
		want Retention
	}{{"a", Retention{1, 1}}, {"c", Retention{2, 2}}} {
		r, err := ReadRetention(ctx, db, c.job)
		require.NoError(t, err)
		require.Equal(t, c.want, r, c.job)
	}
	require.NoError(t, CheckNotExpired(ctx, db, "c", 2))
	err := CheckNotExpired(ctx, db, "c", 1)
	require.ErrorIs(t, err, report.ErrRefused)
	require.EqualError(t, err, "refused: snapshot 1 of c expired (oldest kept: 2)")

	tx := begin(t, db)
	require.NoError(t, WriteRetention(ctx, tx, "c", Retention{OldestKept: 3, InputsFrom: 2}))
	require.NoError(t, tx.Commit())
	r, err := ReadRetention(ctx, db, "c")
	require.NoError(t, err)
	require.Equal(t, Retention{3, 2}, r)
	require.Equal(t, []string{"1"}, rows(t, db, `SELECT count(*) FROM idem.retention WHERE job = 'c'`))

	// A database from before idem.retention, read as it is, expired nothing.
	old := openMemory(t)
	exec(t, old, `CREATE SCHEMA idem`)
	r, err = ReadRetention(ctx, old, "a")
	require.NoError(t, err)
	require.Equal(t, Retention{1, 1}, r)

	pins, err := DownstreamPins(ctx, db, "a")
	require.NoError(t, err)
	require.Equal(t, map[string]int64{"d": 3}, pins, "apply jobs only, and job a only, not aa")
}

func TestExpireRows(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := expiryFixture(t)

	by, err := OutcomeRowsBySnapshot(ctx, db, "a", "t_outcomes")
	require.NoError(t, err)
	require.Equal(t, map[int64]int64{1: 2, 2: 1, 3: 1, 4: 1}, by)
	n, err := CountPackets(ctx, db, "a", 3)
	require.NoError(t, err)
	require.Equal(t, int64(2), n)

	tx := begin(t, db)
	require.NoError(t, ExpireOutcomes(ctx, tx, "a", "t_outcomes", 3))
	gone, err := ExpirePackets(ctx, tx, "a", 3)
	require.NoError(t, err)
	require.Equal(t, int64(2), gone)
	require.NoError(t, tx.Commit())
	require.Equal(t, []string{"b3", "b4"}, rows(t, db, `SELECT batch_id FROM t_outcomes ORDER BY 1`))
	require.Equal(t, []string{"3", "4"}, rows(t, db, `SELECT snapshot FROM idem.packets ORDER BY 1`))
	require.Equal(t, []string{"5"}, rows(t, db, `SELECT count(*) FROM idem.ledger`), "the ledger stays: an expired batch is still committed")

	// An outcomes table without batch_id, or none at all, is left alone.
	exec(t, db, `CREATE TABLE plain (outcome VARCHAR)`, `INSERT INTO plain VALUES ('x')`)
	for _, table := range []string{"plain", "missing", ""} {
		tx := begin(t, db)
		require.NoError(t, ExpireOutcomes(ctx, tx, "a", table, 9), table)
		require.NoError(t, tx.Commit())
		by, err := OutcomeRowsBySnapshot(ctx, db, "a", table)
		require.NoError(t, err)
		require.Empty(t, by)
	}
	require.Equal(t, []string{"1"}, rows(t, db, `SELECT count(*) FROM plain`))
}

func TestExpireInputs(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := expiryFixture(t)

	// c's snapshot 1 is below its inputs_from: s3 is kept for a's sake
	// only, and s4 for c's.
	elsewhere, err := InputsNamedElsewhere(ctx, db, "a")
	require.NoError(t, err)
	require.Equal(t, map[string]bool{"s4": true}, elsewhere)
	elsewhere, err = InputsNamedElsewhere(ctx, db, "c")
	require.NoError(t, err)
	require.Equal(t, map[string]bool{"s1": true, "s2": true, "s3": true}, elsewhere)

	sizes, err := RetainedInputSizes(ctx, db)
	require.NoError(t, err)
	require.Equal(t, map[string]int64{"s1": 100, "s2": 200, "s3": 300, "s4": 400}, sizes)
	files, bytes, err := JobInputBytes(ctx, db, "a")
	require.NoError(t, err)
	require.Equal(t, []int64{3, 600}, []int64{files, bytes}, "distinct inputs, each once")

	tx := begin(t, db)
	require.NoError(t, ForgetInputs(ctx, tx, []string{"s1", "s4"}))
	require.NoError(t, ForgetInputs(ctx, tx, nil))
	require.NoError(t, tx.Commit())
	sizes, err = RetainedInputSizes(ctx, db)
	require.NoError(t, err)
	require.Equal(t, map[string]int64{"s2": 200, "s3": 300}, sizes)
	files, bytes, err = JobInputBytes(ctx, db, "a")
	require.NoError(t, err)
	require.Equal(t, []int64{2, 500}, []int64{files, bytes}, "a forgotten input counts no more")
}

func TestCheckpointRows(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := newCatalog(t)
	files := []CheckpointFile{{Part: "target", SHA256: "f1", Bytes: 10}, {Part: "idem.ledger", SHA256: "f2", Bytes: 5}}
	manifest := CheckpointManifest("a", 2, files)
	require.Equal(t, `{"files":[{"bytes":10,"part":"target","sha256":"f1"},{"bytes":5,"part":"idem.ledger","sha256":"f2"}],"job":"a","snapshot":2}`, string(manifest))
	for _, c := range []Checkpoint{{Job: "a", Snapshot: 2, SHA256: "m2", Bytes: 15, Files: files}, {Job: "a", Snapshot: 4, SHA256: "m4", Bytes: 7, Files: files[:1]}, {Job: "b", Snapshot: 2, SHA256: "mb", Bytes: 1, Files: []CheckpointFile{}}} {
		require.NoError(t, RecordCheckpoint(ctx, db, c))
	}
	cs, err := Checkpoints(ctx, db, "a")
	require.NoError(t, err)
	require.Len(t, cs, 2)
	require.Equal(t, &Checkpoint{Job: "a", Snapshot: 2, SHA256: "m2", Bytes: 15, Files: files}, cs[0])
	for sum, want := range map[string]int{"f1": 2, "f2": 1, "m4": 1, "zz": 0} {
		n, err := CheckpointReferences(ctx, db, sum)
		require.NoError(t, err)
		require.Equal(t, want, n, sum)
	}
	bytes, err := CheckpointBytes(ctx, db, "a")
	require.NoError(t, err)
	require.Equal(t, int64(22), bytes)

	require.NoError(t, ReplaceCheckpoint(ctx, db, Checkpoint{Job: "a", Snapshot: 2, SHA256: "m2b", Bytes: 3, Files: files[1:]}))
	require.NoError(t, DeleteCheckpoint(ctx, db, "a", 4))
	cs, err = Checkpoints(ctx, db, "a")
	require.NoError(t, err)
	require.Equal(t, []*Checkpoint{{Job: "a", Snapshot: 2, SHA256: "m2b", Bytes: 3, Files: files[1:]}}, cs)

	// A database from before idem.checkpoints has none.
	old := openMemory(t)
	cs, err = Checkpoints(ctx, old, "a")
	require.NoError(t, err)
	require.Empty(t, cs)
	bytes, err = CheckpointBytes(ctx, old, "a")
	require.NoError(t, err)
	require.Zero(t, bytes)
}

// TestCheckpointIdemRows copies a job's rows of a checkpointed idem table
// to Parquet and loads them into another catalog; other tables are
// refused.
func TestCheckpointIdemRows(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	from, to := newCatalog(t), newCatalog(t)
	exec(t, from, `INSERT INTO idem.ledger (job, batch_id, digest, input_digest, rows_in, outcomes, snapshot) VALUES
		('a', 'b2', 'd', 'i', 1, '{}', 2), ('a', 'b1', 'd', 'i', 1, '{}', 1), ('other', 'b1', 'd', 'i', 1, '{}', 1)`)
	out := filepath.Join(t.TempDir(), "ledger.parquet")
	require.NoError(t, CopyIdemRows(ctx, from, "ledger", "a", out))
	require.NoError(t, LoadIdemRows(ctx, to, "ledger", out))
	require.Equal(t, []string{"a|b1|1", "a|b2|2"}, rows(t, to, `SELECT job, batch_id, snapshot FROM idem.ledger ORDER BY rowid`))
	require.ErrorContains(t, LoadIdemRows(ctx, to, "ledger", out), "violates unique constraint", "a batch loaded twice")
	require.ErrorContains(t, CopyIdemRows(ctx, from, "runs", "a", out), "idem.runs is not a checkpointed table")
	require.ErrorContains(t, LoadIdemRows(ctx, to, "meta", out), "idem.meta is not a checkpointed table")
}

func TestReleased(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := newCatalog(t)
	j := testJob("a", "t")
	j.TransformVersion, j.SchemaVersion = 1, 1
	j.Steps = []pipeline.Step{{Name: "01_stage.sql", SQL: "SELECT 1"}}
	j.DDL = "CREATE TABLE t (x INT)"
	check := func(record bool) error {
		tx := begin(t, db)
		err := CheckReleased(ctx, tx, j, record)
		if err != nil {
			require.NoError(t, tx.Rollback())
			return err
		}
		return tx.Commit()
	}
	require.NoError(t, check(false))
	require.Empty(t, rows(t, db, `SELECT * FROM idem.released`), "a plan records nothing")
	require.NoError(t, check(true))
	require.Equal(t, []string{"p|schema|1", "p|transform|1"}, rows(t, db, `SELECT pipeline, kind, version FROM idem.released ORDER BY ALL`))
	require.NoError(t, check(true))

	j.Steps[0].SQL = "SELECT 2"
	err := check(true)
	var re *report.RefusedError
	require.ErrorAs(t, err, &re)
	require.Equal(t, "released", re.Guard)
	require.ErrorContains(t, err, "transform v1 of pipeline p was edited after release")
	j.Steps[0].SQL, j.DDL = "SELECT 1", "CREATE TABLE t (y INT)"
	require.ErrorContains(t, check(false), "schema v1 of pipeline p was edited after release")
}

// TestStorage reads the storage of a database file: every table has its
// bytes, and the counting helpers count rows.
func TestStorage(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, err := sql.Open("duckdb", filepath.Join(t.TempDir(), "s.duckdb")+"?threads=1")
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	require.NoError(t, Migrate(ctx, db, "s.duckdb", nil))
	exec(t, db, `CREATE TABLE big AS SELECT range AS id, md5(range::VARCHAR) AS v FROM range(100000)`,
		`CREATE TABLE small (x INT)`, `INSERT INTO small VALUES (1), (2)`, `CHECKPOINT`)
	s, err := ReadStorage(ctx, db)
	require.NoError(t, err)
	require.Positive(t, s.BlockSize)
	// 100,000 md5 strings take a few MB; two integers a block at most.
	require.Greater(t, s.TableBytes("main", "big"), 4*s.BlockSize)
	require.Positive(t, s.TableBytes("main", "small"))
	require.LessOrEqual(t, s.TableBytes("main", "small"), s.BlockSize)
	require.Contains(t, s.Tables, "idem.ledger")
	var sum int64
	for _, b := range s.Tables {
		sum += b
	}
	require.LessOrEqual(t, sum, s.UsedBlocks*s.BlockSize, "the tables' bytes fit in the used blocks")
	require.Zero(t, s.TableBytes("main", "missing"))

	n, err := CountWhere(ctx, db, "small", "x", "2")
	require.NoError(t, err)
	require.Equal(t, int64(1), n)
	n, err = CountQualified(ctx, db, "main", "big")
	require.NoError(t, err)
	require.Equal(t, int64(100000), n)
	n, err = CountQualified(ctx, db, "idem", "missing")
	require.NoError(t, err)
	require.Zero(t, n)
}
