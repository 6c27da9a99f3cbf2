package catalog

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"testing"

	"github.com/idem-dev/idem/internal/job"
	"github.com/idem-dev/idem/internal/jobkey"
	"github.com/idem-dev/idem/internal/pipeline"
	"github.com/idem-dev/idem/internal/report"
	"github.com/stretchr/testify/require"
)

func ptr[T any](v T) *T { return &v }

// testJob is a job of the given name writing table, with key columns.
func testJob(name, table string, key ...string) *job.Job {
	return &job.Job{Name: name, Table: table, Pipeline: &pipeline.Pipeline{Name: "p", Mode: pipeline.ModeApply, Key: key}}
}

func TestStateRow(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := newCatalog(t)
	j := testJob("a", "t", "id")

	st, err := ReadState(ctx, db, "a")
	require.NoError(t, err)
	require.Equal(t, State{Epoch: 1}, st, "a job never run is at epoch 1, snapshot 0")

	parts := jobkey.Parts{Input: "in", Upstream: []jobkey.UpstreamRef{{Job: "up", Snapshot: 3, JobKey: "k"}}}
	require.NoError(t, WriteState(ctx, db, j, "key1", parts.JSON(), 2, 10, 1))
	require.NoError(t, WriteState(ctx, db, j, "key2", parts.JSON(), 3, 12, 1))
	st, err = ReadState(ctx, db, "a")
	require.NoError(t, err)
	require.True(t, st.Exists && st.HasParts)
	require.Equal(t, []any{"key2", "p", "t", int64(3), int64(12), int64(1)}, []any{st.Key, st.Pipeline, st.Target, st.Snapshot, st.Cursor, st.Epoch})
	require.Equal(t, parts.JSON(), st.PartsJSON())
	require.Equal(t, []string{"1"}, rows(t, db, `SELECT count(*) FROM idem.jobs`), "WriteState replaces the row")

	// Fencing: a job never run gets a row at epoch 2; an existing one
	// keeps its row. Each logs the fence and records a commit.
	for _, c := range []struct {
		job  string
		want int64
	}{{"b", 2}, {"a", 2}, {"a", 3}} {
		tx := begin(t, db)
		epoch, err := AdvanceEpoch(ctx, tx, c.job)
		require.NoError(t, err)
		require.NoError(t, tx.Commit())
		require.Equal(t, c.want, epoch)
	}
	require.Equal(t, []string{"a|t|3|3", "b|∅|0|2"}, rows(t, db, `SELECT job, target, snapshot, epoch FROM idem.jobs ORDER BY job`))

	// ReadStates reads in one statement what ReadState reads row by row,
	// a job without a row included.
	states, err := ReadStates(ctx, db, []string{"a", "b", "missing"})
	require.NoError(t, err)
	require.Len(t, states, 3)
	for _, name := range []string{"a", "b", "missing"} {
		st, err := ReadState(ctx, db, name)
		require.NoError(t, err)
		require.Equal(t, st, states[name], name)
	}
	require.True(t, states["a"].HasParts)
	require.False(t, states["missing"].Exists)
	require.Equal(t, []string{"0|∅|created", "1|b|fenced", "2|a|fenced", "3|a|fenced"}, rows(t, db, `SELECT seq, job, kind FROM idem.commits ORDER BY seq`))

	log, err := ReadLog(ctx, db, "a")
	require.NoError(t, err)
	require.Len(t, log, 2)
	require.Equal(t, "fenced", log[0].Decision)
	require.Equal(t, []int64{3, 2}, []int64{log[0].Epoch, log[1].Epoch}, "newest first")
	require.Equal(t, []string{}, log[0].Changed)
	require.Nil(t, log[0].BatchID)
	require.False(t, log[0].FirstLoad)
}

func TestStateGuards(t *testing.T) {
	t.Parallel()
	fenced := testJob("a", "t")
	fenced.Fencing = job.FencingRequired
	free := testJob("a", "t")
	st := State{Exists: true, Snapshot: 4, Epoch: 2}
	cases := []struct {
		name   string
		j      *job.Job
		epoch  *int64
		parent *int64
		want   string // "" accepted, else the refusal's guard
	}{
		{name: "no guards", j: free},
		{name: "current epoch", j: free, epoch: ptr[int64](2)},
		{name: "stale epoch", j: free, epoch: ptr[int64](1), want: "epoch"},
		{name: "future epoch", j: free, epoch: ptr[int64](3), want: "epoch"},
		{name: "fencing without epoch", j: fenced, want: "epoch"},
		{name: "fencing with epoch", j: fenced, epoch: ptr[int64](2)},
		{name: "latest parent", j: free, parent: ptr[int64](4)},
		{name: "stale parent", j: free, parent: ptr[int64](3), want: "parent"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			err := errors.Join(st.CheckEpoch(c.j, c.epoch), st.CheckParent(c.parent))
			if c.want == "" {
				require.NoError(t, err)
				return
			}
			var re *report.RefusedError
			require.ErrorAs(t, err, &re)
			require.Equal(t, c.want, re.Guard)
			require.Equal(t, report.ExitRefused, report.ExitCode(err))
		})
	}
}

func TestLedger(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := newCatalog(t)

	started, cursor, err := ChunkStart(ctx, db, "a")
	require.NoError(t, err)
	require.False(t, started)
	require.Zero(t, cursor)
	_, ok, err := ReadLedger(ctx, db, "a", "b1")
	require.NoError(t, err)
	require.False(t, ok)

	for i, b := range []NewBatch{
		{Job: "a", BatchID: "b1", Digest: "d1", InputDigest: "i1", RowsIn: 3, Outcomes: `{"accepted":3}`, Snapshot: 1},
		{Job: "a", BatchID: "b2", Digest: "d2", InputDigest: "i1", From: int64(0), To: int64(20), RowsIn: 2, Outcomes: `{}`, Snapshot: 2},
		{Job: "c", BatchID: "b1", Digest: "d9", InputDigest: "i9", RowsIn: 1, Outcomes: `{}`, Snapshot: 1},
	} {
		require.NoError(t, InsertLedger(ctx, db, b), i)
	}
	require.NoError(t, WriteState(ctx, db, testJob("a", "t"), "k", "", 2, 20, 1))

	row, ok, err := ReadLedger(ctx, db, "a", "b2")
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, LedgerRow{Digest: "d2", Outcomes: `{}`, RowsIn: 2, Snapshot: 2, To: row.To}, row)
	require.Equal(t, int64(20), row.To.Int64)
	row, _, err = ReadLedger(ctx, db, "a", "b1")
	require.NoError(t, err)
	require.False(t, row.To.Valid, "a batch without bounds")

	for _, c := range []struct {
		job, input string
		want       bool
	}{{"a", "i1", true}, {"a", "i9", false}, {"c", "i9", true}} {
		read, err := ReadInput(ctx, db, c.job, c.input)
		require.NoError(t, err)
		require.Equal(t, c.want, read, "%s %s", c.job, c.input)
	}
	started, cursor, err = ChunkStart(ctx, db, "a")
	require.NoError(t, err)
	require.True(t, started)
	require.Equal(t, int64(20), cursor)
	require.Equal(t, []string{"b1"}, rows(t, db, LedgerBatchesUpTo("a", 1)+" ORDER BY 1"))
	require.Equal(t, []string{"b1", "b2"}, rows(t, db, LedgerBatchesUpTo("a", 5)+" ORDER BY 1"))
	require.Equal(t, []string{"x'y"}, rows(t, db, "SELECT 'x''y' FROM (SELECT 1) WHERE NOT EXISTS ("+LedgerBatchesUpTo("x'y", 9)+")"), "the job name is a quoted literal")

	// A batch applies once, whatever writes it.
	err = InsertLedger(ctx, db, NewBatch{Job: "a", BatchID: "b1", Digest: "other", InputDigest: "i2", Outcomes: "{}", Snapshot: 3})
	require.ErrorContains(t, err, "violates unique constraint")
}

func TestSnapshotRows(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := newCatalog(t)
	j := testJob("a", "t", "id")
	exec(t, db, `CREATE TABLE t (id INT, v VARCHAR)`, `INSERT INTO t VALUES (1, 'x'), (2, 'y')`)
	from, to := int64(0), int64(7)
	in := SnapshotInputs{Files: []InputRef{{SHA256: "s1", Bytes: 10, Name: "a.csv"}}, Format: "csv", Bounds: Bounds{From: &from, To: &to}}
	for s := int64(1); s <= 2; s++ {
		require.NoError(t, InsertSnapshot(ctx, db, NewSnapshot{Job: "a", Snapshot: s, Parent: s - 1, Kind: report.DecisionApplied,
			BatchID: "b", JobKey: "k", Parts: `{"input":"i"}`, Inputs: string(jobkey.CanonicalJSON(in)),
			RowsIn: 5, RowsOut: 2, Outcomes: `{"accepted":5}`, Columns: `[{"name":"id","type":"INTEGER"}]`, KeyColumns: `["id"]`}))
	}
	require.NoError(t, WriteState(ctx, db, j, "k", `{"input":"i"}`, 2, 7, 1))

	s, err := ReadSnapshot(ctx, db, "a", 2)
	require.NoError(t, err)
	require.Equal(t, &SnapshotRow{Job: "a", Snapshot: 2, Parent: 1, Kind: report.DecisionApplied, BatchID: "b", JobKey: "k", PartsJSON: `{"input":"i"}`,
		Inputs: in, Columns: []TargetColumn{{Name: "id", Type: "INTEGER"}}, KeyColumns: []string{"id"}}, s)
	p, err := s.Parts()
	require.NoError(t, err)
	require.Equal(t, "i", p.Input)
	_, err = ReadSnapshot(ctx, db, "a", 3)
	require.ErrorIs(t, err, report.ErrUsage)
	require.ErrorContains(t, err, "job a has no snapshot 3 (latest is 2)")
	all, err := ReadSnapshots(ctx, db, "a", 1)
	require.NoError(t, err)
	require.Len(t, all, 1)

	c, err := ReadSnapshotCounts(ctx, db, "a", 2)
	require.NoError(t, err)
	require.Equal(t, int64(5), c.RowsIn)
	require.Equal(t, `{"accepted":5}`, c.Outcomes)
	require.Equal(t, int64(2), c.RowsOut.Int64)
	c, err = ReadSnapshotCounts(ctx, db, "a", 9)
	require.NoError(t, err)
	require.Zero(t, c.RowsIn)
	require.Empty(t, c.Outcomes)
	require.False(t, c.RowsOut.Valid)

	require.NoError(t, SetSnapshotInputs(ctx, db, "a", 1, SnapshotInputs{Files: []InputRef{}}))
	s, err = ReadSnapshot(ctx, db, "a", 1)
	require.NoError(t, err)
	require.Empty(t, s.Inputs.Files)

	// An erasure's snapshot: its row, the state row and the run log.
	tx := begin(t, db)
	st, err := ReadState(ctx, tx, "a")
	require.NoError(t, err)
	require.NoError(t, WriteSnapshotOnly(ctx, tx, j, st, 3, report.KindErase, SnapshotInputs{}, "k", `{"input":"i"}`))
	require.NoError(t, tx.Commit())
	require.Equal(t, []string{`3|2|erase|∅|2|{"bounds":{"from":null,"to":null},"files":[]}|[{"name":"id","type":"INTEGER"},{"name":"v","type":"VARCHAR"}]|["id"]`},
		rows(t, db, `SELECT snapshot, parent, kind, batch_id, rows_out, inputs, columns, key_columns FROM idem.snapshots WHERE snapshot = 3`))
	require.Equal(t, []string{"3|erased"}, rows(t, db, `SELECT snapshot, decision FROM idem.runs`))
	require.Equal(t, []string{"1|a|erased"}, rows(t, db, `SELECT seq, job, kind FROM idem.commits WHERE seq > 0`))

	// Pinned reads resolve against the state row and the retention.
	for _, c := range []struct {
		want, got int64
		err       error
	}{{0, 3, nil}, {2, 2, nil}, {4, 0, report.ErrUsage}, {-1, 0, report.ErrUsage}, {1, 0, report.ErrRefused}} {
		if c.want == 1 {
			tx := begin(t, db)
			require.NoError(t, WriteRetention(ctx, tx, "a", Retention{OldestKept: 2, InputsFrom: 2}))
			require.NoError(t, tx.Commit())
		}
		got, latest, err := ResolveSnapshot(ctx, db, "a", c.want)
		if c.err != nil {
			require.ErrorIs(t, err, c.err, "snapshot %d", c.want)
			continue
		}
		require.NoError(t, err)
		require.Equal(t, []int64{c.got, 3}, []int64{got, latest})
	}
	_, _, err = ResolveSnapshot(ctx, db, "never", 0)
	require.ErrorContains(t, err, "job never has no snapshot yet")
}

func TestPositions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := newCatalog(t)
	got, err := ReadPositions(ctx, db, "s")
	require.NoError(t, err)
	require.Empty(t, got)
	require.NoError(t, WritePositions(ctx, db, "s", map[string]int64{"0": 10, "1": 5}, 1))
	require.NoError(t, WritePositions(ctx, db, "other", map[string]int64{"": 3}, 1))
	// A later batch moves partition 1 only: partition 0 keeps its row.
	require.NoError(t, WritePositions(ctx, db, "s", map[string]int64{"1": 8}, 2))
	got, err = ReadPositions(ctx, db, "s")
	require.NoError(t, err)
	require.Equal(t, map[string]int64{"0": 10, "1": 8}, got)
	require.Equal(t, []string{"other||3|1", "s|0|10|1", "s|1|8|2"}, rows(t, db, `SELECT job, partition, next, snapshot FROM idem.positions ORDER BY ALL`))
	got, err = ReadPositions(ctx, db, "other")
	require.NoError(t, err)
	require.Equal(t, map[string]int64{"": 3}, got)
	// A batch that moves a partition with a row (updated in place) and
	// reads a new one (inserted): one row per partition, other jobs' kept.
	require.NoError(t, WritePositions(ctx, db, "s", map[string]int64{"1": 9, "2": 4}, 3))
	require.Equal(t, []string{"other||3|1", "s|0|10|1", "s|1|9|3", "s|2|4|3"}, rows(t, db, `SELECT job, partition, next, snapshot FROM idem.positions ORDER BY ALL`))
}

func TestCommitsAndWAL(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cases := []struct {
		name    string
		setup   []string
		refused bool
	}{
		{name: "own commits"},
		// Since catalog version 9 a commit is its run log row (idem.commits
		// is a view of them): the rows a foreign WAL would replay.
		{name: "another database's commits", setup: []string{`INSERT INTO idem.runs (job, run_at, decision, seq, db_id) VALUES ('a', current_timestamp, 'applied', 3, 'other')`}, refused: true},
		{name: "an older copy's commit again", setup: []string{`INSERT INTO idem.runs (job, run_at, decision, seq, db_id) SELECT 'a', current_timestamp, 'applied', 1, db_id FROM idem.commits WHERE seq = 0`}, refused: true},
		{name: "a copy that went on alone", setup: []string{`INSERT INTO idem.runs (job, run_at, decision, seq, db_id) SELECT 'a', current_timestamp, 'applied', 5, db_id FROM idem.commits WHERE seq = 0`}, refused: true},
		{name: "another database's creation", setup: []string{`INSERT INTO idem.meta (key, value) VALUES ('db_id', 'other')`}, refused: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			db := newCatalog(t)
			for _, k := range []string{"applied", "fenced"} {
				tx := begin(t, db)
				require.NoError(t, InsertRun(ctx, tx, RunRow{Job: "a", Decision: k, Changed: "[]", Commit: true}))
				require.NoError(t, tx.Commit())
			}
			require.Equal(t, []string{"0|∅|created", "1|a|applied", "2|a|fenced"}, rows(t, db, `SELECT seq, job, kind FROM idem.commits ORDER BY seq`))
			require.Equal(t, []string{"1"}, rows(t, db, `SELECT count(DISTINCT db_id) FROM idem.commits`))
			exec(t, db, c.setup...)
			err := CheckWAL(ctx, db, "db.duckdb", "db.duckdb.wal")
			if !c.refused {
				require.NoError(t, err)
				return
			}
			var re *report.RefusedError
			require.ErrorAs(t, err, &re)
			require.Equal(t, "wal", re.Guard)
			require.ErrorContains(t, err, "db.duckdb.wal does not belong to database db.duckdb")
		})
	}
	// A database without idem.commits (not an idem database) has no WAL
	// of idem's to check.
	require.NoError(t, CheckWAL(ctx, openMemory(t), "x", "x.wal"))
}

func TestOwners(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := newCatalog(t)
	a := testJob("a", "T")
	a.DDL = "CREATE TABLE {{table}} (x INT); CREATE VIEW {{ table:_active }} AS SELECT 1"
	a.Pipeline.OutcomesTable = "_outcomes"
	b := testJob("b", "t_outcomes")
	c := testJob("c", "u")

	claim := func(j *job.Job, write bool) error {
		tx := begin(t, db)
		if err := CheckOwners(ctx, tx, j, write); err != nil {
			return errors.Join(err, tx.Rollback())
		}
		return tx.Commit()
	}
	require.NoError(t, claim(a, false))
	require.Empty(t, rows(t, db, `SELECT * FROM idem.owners`), "a check without claim records nothing")
	require.NoError(t, claim(a, true))
	require.Equal(t, []string{"idem.a__history|a", "main.t|a", "main.t_active|a", "main.t_outcomes|a"}, rows(t, db, `SELECT name, job FROM idem.owners ORDER BY ALL`))
	require.NoError(t, claim(a, true), "a job writes its own names")

	err := claim(b, true)
	var re *report.RefusedError
	require.ErrorAs(t, err, &re)
	require.Equal(t, "owner", re.Guard)
	require.ErrorContains(t, err, `table "t_outcomes" belongs to job "a"; job "b" may not create or write it`)
	require.NoError(t, claim(c, true))
	require.Equal(t, []string{"a|4", "c|2"}, rows(t, db, `SELECT job, count(*) FROM idem.owners GROUP BY job ORDER BY job`))
}

func TestInputsFilesErasures(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := newCatalog(t)

	require.NoError(t, RecordInput(ctx, db, "s1", 10))
	require.NoError(t, RecordInput(ctx, db, "s1", 10))
	require.NoError(t, RecordInput(ctx, db, "s2", 20))
	sums, err := RetainedSums(ctx, db)
	require.NoError(t, err)
	require.Equal(t, map[string]bool{"s1": true, "s2": true}, sums)
	require.Equal(t, []string{"2"}, rows(t, db, `SELECT count(*) FROM idem.inputs`), "one record per content")
	exec(t, db, `INSERT INTO idem.snapshots (job, snapshot, parent, kind, inputs) VALUES ('a', 1, 0, 'applied', '{"files":[{"sha256":"s1"}]}')`)
	refs, err := InputReferences(ctx, db, "s1")
	require.NoError(t, err)
	require.Equal(t, 1, refs)
	require.NoError(t, ForgetInput(ctx, db, "s1"))
	sums, err = RetainedSums(ctx, db)
	require.NoError(t, err)
	require.Equal(t, map[string]bool{"s2": true}, sums)

	require.NoError(t, RecordFile(ctx, db, "a", "in/2026-01-01.jsonl", "f1", 5, "2026-01-01.jsonl", 1))
	require.NoError(t, RecordFile(ctx, db, "a", "2026-01-01.jsonl", "f2", 5, "again", 3))
	require.NoError(t, RecordFile(ctx, db, "a", "in/x-2026-01-01.jsonl", "f3", 5, "x", 2))
	files, err := CommittedFiles(ctx, db, "a")
	require.NoError(t, err)
	require.Equal(t, map[string][]FileRecord{
		"2026-01-01.jsonl":   {{SHA256: "f1", BatchID: "2026-01-01.jsonl", Snapshot: 1}, {SHA256: "f2", BatchID: "again", Snapshot: 3}},
		"x-2026-01-01.jsonl": {{SHA256: "f3", BatchID: "x", Snapshot: 2}},
	}, files)
	tx := begin(t, db)
	one, err := CommittedFile(ctx, tx, "a", "2026-01-01.jsonl")
	require.NoError(t, err)
	require.NoError(t, tx.Rollback())
	require.Equal(t, []FileRecord{{SHA256: "f1", BatchID: "2026-01-01.jsonl", Snapshot: 1}, {SHA256: "f2", BatchID: "again", Snapshot: 3}}, one,
		"a name matches a whole path element, not a suffix of one")

	require.NoError(t, RecordErasure(ctx, db, "a", "k1", ptr[int64](4), 2, nil))
	require.NoError(t, RecordErasure(ctx, db, "a", "k1", ptr[int64](9), 5, nil))
	require.NoError(t, RecordErasure(ctx, db, "a", "k2", nil, 5, nil))
	n, err := CountErasures(ctx, db, "a", "k1", false)
	require.NoError(t, err)
	require.Equal(t, 2, n)
	by, err := ErasuresBySnapshot(ctx, db, "a")
	require.NoError(t, err)
	// The values are kept as their hash salted with the database's id.
	salt, _, err := CommitPoint(ctx, db)
	require.NoError(t, err)
	hash := func(v string) string {
		sum := sha256.Sum256([]byte(salt + v))
		return hex.EncodeToString(sum[:])
	}
	k1, k2 := hash("k1"), hash("k2")
	want := map[int64][]Erasure{2: {{Key: k1, Salt: salt, Position: ptr[int64](4)}}, 5: {{Key: k1, Salt: salt, Position: ptr[int64](9)}, {Key: k2, Salt: salt}}}
	if k2 < k1 {
		want[5][0], want[5][1] = want[5][1], want[5][0]
	}
	require.Equal(t, want, by)
	require.Equal(t, []string{"0"}, rows(t, db, `SELECT count(*) FROM idem.erasures WHERE key IN ('k1', 'k2')`), "no erased value is stored")

	// ErasedIn: a pinned read's rows of erased keys at or below the erased
	// position (any row of a key erased without one).
	j := testJob("a", "t", "id")
	j.Pipeline.Position = "pos"
	pinned := `SELECT * FROM (VALUES ('k1', 9), ('k1', 10), ('k2', 100), ('k3', 1)) AS v(id, pos)`
	erased, err := ErasedIn(ctx, db, j, pinned)
	require.NoError(t, err)
	require.Equal(t, int64(2), erased)
	j.Pipeline.Position = ""
	erased, err = ErasedIn(ctx, db, j, pinned)
	require.NoError(t, err)
	require.Equal(t, int64(3), erased)
}

// TestCheckIdentity: a job file is the job the database holds when its
// pipeline and target are the recorded ones (the table's name without
// case); another pipeline or target is refused, naming both; a job with
// nothing committed, or a row without them (fenced only), has no identity
// to keep.
func TestCheckIdentity(t *testing.T) {
	t.Parallel()
	j := testJob("a", "t", "id")
	j.File = "a.toml"
	for _, tc := range []struct {
		name string
		st   State
		want string
	}{
		{"never run", State{Epoch: 1}, ""},
		{"fenced, nothing committed", State{Exists: true, Epoch: 2}, ""},
		{"the same job", State{Exists: true, Snapshot: 3, Pipeline: "p", Target: "t"}, ""},
		{"the target without case", State{Exists: true, Snapshot: 3, Pipeline: "p", Target: "T"}, ""},
		{"another pipeline", State{Exists: true, Snapshot: 3, Pipeline: "q", Target: "t"},
			"job a in this database is pipeline q into table t (snapshot 3), but a.toml is pipeline p into table t: two jobs share the name a; nothing was changed"},
		{"another target", State{Exists: true, Snapshot: 3, Pipeline: "p", Target: "u"},
			"job a in this database is pipeline p into table u (snapshot 3), but a.toml is pipeline p into table t"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := tc.st.CheckIdentity(j)
			if tc.want == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, report.ErrRefused)
			require.ErrorContains(t, err, tc.want)
		})
	}
}
