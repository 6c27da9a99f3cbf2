package history_test

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idem-dev/idem/internal/catalog"
	"github.com/idem-dev/idem/internal/history"
	"github.com/idem-dev/idem/internal/job"
	"github.com/idem-dev/idem/internal/report"
	"github.com/idem-dev/idem/internal/run"
	"github.com/idem-dev/idem/internal/source"
	"github.com/idem-dev/idem/pipelines"
)

// The reruns from checkpoints ([retention] checkpoint_every), tested here
// through the library; cmd/idem/cli/crashtest's TestRerunFromCheckpointCLI and
// TestCheckpointKill test the CLI's wiring and kills.

// ckptJob is a versioned_changes job with [retention] checkpoint_every = 5
// in its own folder (database ck.duckdb beside job.toml) with generated
// batches b1.jsonl ... b15.jsonl. Each operation opens the database and
// closes it, as a command does.
type ckptJob struct {
	t    *testing.T
	dir  string
	db   string
	file string
	j    *job.Job
}

// newCheckpointJob writes the job file and the batches into dir.
func newCheckpointJob(t *testing.T, dir string) *ckptJob {
	t.Helper()
	writeJob(t, dir, `name = "cs"
pipeline = "versioned_changes"
transform_version = 1
schema_version = 1
database = "ck.duckdb"

[input]
path = "b1.jsonl"

[target]
table = "cs"

[retention]
checkpoint_every = 5

[duckdb]
threads = 1
`)
	// Batches over 40 entities: versions overlap from batch to batch (some
	// stale), entities repeat within a batch (superseded), some deletes.
	rng := rand.New(rand.NewPCG(16, 2))
	for b := 1; b <= 15; b++ {
		var sb strings.Builder
		for i := range 25 {
			op := "upsert"
			if rng.IntN(10) == 0 {
				op = "delete"
			}
			fmt.Fprintf(&sb, `{"change_id":"c%d-%d","entity_id":"e%d","source_version":%d,"operation":%q,"value":"v%d"}`+"\n",
				b, i, rng.IntN(40), b*100+rng.IntN(150), op, rng.IntN(4))
		}
		require.NoError(t, os.WriteFile(filepath.Join(dir, fmt.Sprintf("b%d.jsonl", b)), []byte(sb.String()), 0o644))
	}
	return ckptJobAt(t, dir)
}

func ckptJobAt(t *testing.T, dir string) *ckptJob {
	t.Helper()
	c := &ckptJob{t: t, dir: dir, db: filepath.Join(dir, "ck.duckdb"), file: filepath.Join(dir, "job.toml")}
	var err error
	c.j, err = run.LoadJob(c.file, pipelines.FS)
	require.NoError(t, err)
	return c
}

var chainOnce struct {
	once sync.Once
	dirs map[int]string
	err  error
}

// checkpointChain is a copy, in a folder of the test's own, of the job after
// batches 1..applied (7, 10, 12 or 15), from a chain of 15 applied once per
// package run (in a folder TestMain removes) and shared by these tests.
func checkpointChain(t *testing.T, applied int) *ckptJob {
	t.Helper()
	chainOnce.once.Do(func() {
		chainOnce.dirs, chainOnce.err = buildChain(t)
	})
	require.NoError(t, chainOnce.err, "the shared checkpoint chain")
	src, ok := chainOnce.dirs[applied]
	require.True(t, ok, "the shared chain has no copy after %d batches", applied)
	dir := filepath.Join(t.TempDir(), "ck")
	require.NoError(t, copyTree(src, dir))
	return ckptJobAt(t, dir)
}

func buildChain(t *testing.T) (map[int]string, error) {
	dir, err := os.MkdirTemp(fixtureRoot, "ckpt-chain-")
	if err != nil {
		return nil, err
	}
	c := newCheckpointJob(t, dir)
	out := map[int]string{}
	for b := 1; b <= 15; b++ {
		c.apply(b, "")
		if slices.Contains([]int{7, 10, 12, 15}, b) {
			out[b] = filepath.Join(fixtureRoot, fmt.Sprintf("ckpt-chain-at-%d", b))
			if err := copyTree(dir, out[b]); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}

// copyTree copies the files under src into dst (created).
func copyTree(src, dst string) error {
	return filepath.WalkDir(src, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		to := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(to, 0o755)
		}
		in, err := os.Open(p)
		if err != nil {
			return err
		}
		defer in.Close()
		out, err := os.Create(to)
		if err != nil {
			return err
		}
		if _, err := io.Copy(out, in); err != nil {
			out.Close()
			return err
		}
		return out.Close()
	})
}

// open opens the job's database (read-only when asked), closed when f
// returns.
func (c *ckptJob) open(readOnly bool, f func(d *run.DB)) {
	c.t.Helper()
	d, err := run.Open(context.Background(), c.db, run.OpenOptions{ReadOnly: readOnly, DuckDB: c.j.DuckDB})
	require.NoError(c.t, err)
	defer func() { require.NoError(c.t, d.Close()) }()
	f(d)
}

// apply runs batch b under batch id id (default b<b>.jsonl), as idem run
// does.
func (c *ckptJob) apply(b int, id string) *run.Result {
	c.t.Helper()
	var res *run.Result
	c.open(false, func(d *run.DB) {
		var err error
		res, err = d.Run(context.Background(), c.j, run.RunOptions{Input: filepath.Join(c.dir, fmt.Sprintf("b%d.jsonl", b)), BatchID: id, Expire: history.ExpireAfterRun})
		require.NoError(c.t, err, "run batch %d", b)
	})
	require.Equal(c.t, report.DecisionApplied, res.Decision)
	return res
}

// erase erases key, as idem erase does.
func (c *ckptJob) erase(key string) {
	c.t.Helper()
	c.open(false, func(d *run.DB) {
		_, err := history.Erase(context.Background(), d, c.j, history.EraseOptions{Key: key})
		require.NoError(c.t, err, "erase %s", key)
	})
}

// rollback rolls the job back to snapshot to, as idem rollback does.
func (c *ckptJob) rollback(to int64) {
	c.t.Helper()
	c.open(false, func(d *run.DB) {
		_, err := history.Rollback(context.Background(), d, c.j, to, history.RollbackOptions{})
		require.NoError(c.t, err, "rollback to %d", to)
	})
}

// rerunErr reruns with opts on the database opened read-only, as idem rerun
// does.
func (c *ckptJob) rerunErr(opts history.RerunOptions) (*history.RerunResult, error) {
	c.t.Helper()
	opts.DuckDB = c.j.DuckDB
	var res *history.RerunResult
	var err error
	c.open(true, func(d *run.DB) {
		res, err = history.Rerun(context.Background(), d, c.j, opts)
	})
	return res, err
}

// rerun reruns with opts and requires that it reproduced the snapshot.
func (c *ckptJob) rerun(opts history.RerunOptions) *history.RerunResult {
	c.t.Helper()
	res, err := c.rerunErr(opts)
	require.NoError(c.t, err, "rerun %+v", opts)
	require.True(c.t, res.Reproduced, "rerun %+v did not reproduce", opts)
	return res
}

// checkpoints are the job's idem.checkpoints rows.
func (c *ckptJob) checkpoints() []*catalog.Checkpoint {
	c.t.Helper()
	var out []*catalog.Checkpoint
	c.open(true, func(d *run.DB) {
		var err error
		out, err = catalog.Checkpoints(context.Background(), d.SQL(), "cs")
		require.NoError(c.t, err)
	})
	return out
}

// part is the store path of checkpoint cp's part.
func (c *ckptJob) part(cp *catalog.Checkpoint, part string) string {
	for _, f := range cp.Files {
		if f.Part == part {
			return source.RetainedPath(c.db, f.SHA256)
		}
	}
	c.t.Fatalf("checkpoint %d has no part %s", cp.Snapshot, part)
	return ""
}

// query returns the text of a one-column query.
func (c *ckptJob) query(q string, args ...any) []string {
	c.t.Helper()
	var out []string
	c.open(true, func(d *run.DB) { out = c.queryOn(d, q, args...) })
	return out
}

// queryOn is query on a database already open.
func (c *ckptJob) queryOn(d *run.DB, q string, args ...any) []string {
	c.t.Helper()
	rows, err := d.SQL().QueryContext(context.Background(), q, args...)
	require.NoError(c.t, err)
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s sql.NullString
		require.NoError(c.t, rows.Scan(&s))
		out = append(out, s.String)
	}
	require.NoError(c.t, rows.Err())
	return out
}

// state is every table of the database (the run log and the commit
// sequence aside) as text, read in one read-only open of the database.
func (c *ckptJob) state() string {
	c.t.Helper()
	var b strings.Builder
	c.open(true, func(d *run.DB) {
		for _, table := range c.queryOn(d, `SELECT schema_name || '.' || table_name FROM duckdb_tables()
		WHERE database_name = current_database() AND NOT (schema_name = 'idem' AND table_name IN ('runs', 'commits'))
		ORDER BY ALL`) {
			schema, name, _ := strings.Cut(table, ".")
			fmt.Fprintf(&b, "%s\n", table)
			for _, r := range c.queryOn(d, `SELECT CAST(x AS VARCHAR) FROM "`+schema+`"."`+name+`" AS x ORDER BY 1`) {
				fmt.Fprintf(&b, "  %s\n", r)
			}
		}
	})
	return b.String()
}

// requireWhole requires that every checkpoint row's files and manifest are
// in the store with their recorded bytes and recorded in idem.inputs, and
// that the store holds no file idem.inputs does not name.
func (c *ckptJob) requireWhole() {
	c.t.Helper()
	named := map[string]bool{}
	for _, s := range c.query(`SELECT sha256 FROM idem.inputs`) {
		named[s] = true
	}
	for _, cp := range c.checkpoints() {
		require.NoError(c.t, source.VerifyCheckpoint(c.t.Context(), c.db, cp), "checkpoint %d", cp.Snapshot)
		require.True(c.t, named[cp.SHA256], "checkpoint %d: manifest not in idem.inputs", cp.Snapshot)
		for _, f := range cp.Files {
			require.True(c.t, named[f.SHA256], "checkpoint %d: %s not in idem.inputs", cp.Snapshot, f.Part)
		}
	}
	require.NoError(c.t, filepath.WalkDir(c.db+".inputs", func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		require.True(c.t, named[d.Name()], "the store holds %s, which no idem.inputs row names", p)
		return nil
	}))
}

// TestRerunFromCheckpoint: 15 batches with checkpoint_every = 5 keep
// checkpoints 5, 10 and 15; a rerun starts from the nearest one at or
// before its snapshot, replays only the snapshots after it and reproduces
// the snapshot; FromStart replays all 15. The rerun writes nothing.
func TestRerunFromCheckpoint(t *testing.T) {
	t.Parallel()
	c := checkpointChain(t, 15)
	var snaps []int64
	for _, cp := range c.checkpoints() {
		snaps = append(snaps, cp.Snapshot)
	}
	require.Equal(t, []int64{5, 10, 15}, snaps)
	c.requireWhole()
	before := c.state()

	for _, tc := range []struct {
		snapshot  int64
		fromStart bool
		replayed  int
		from      int64
	}{
		{15, false, 0, 15},
		{12, false, 2, 10},
		{10, false, 0, 10},
		{9, false, 4, 5},
		{3, false, 3, 0},
		{15, true, 15, 0},
	} {
		t.Run(fmt.Sprintf("snapshot%d_fromstart%v", tc.snapshot, tc.fromStart), func(t *testing.T) {
			res := c.rerun(history.RerunOptions{Snapshot: tc.snapshot, FromStart: tc.fromStart})
			require.Equal(t, tc.snapshot, res.Snapshot)
			require.Equal(t, tc.replayed, res.Replayed)
			require.Equal(t, tc.from, res.FromCheckpoint)
		})
	}
	// What a rerun of 12 reads: checkpoint 10 and the inputs of 11 and 12.
	c.open(true, func(d *run.DB) {
		cp, inputs, err := history.RerunNeeds(t.Context(), d.SQL(), c.j, 12)
		require.NoError(t, err)
		require.Equal(t, int64(10), cp.Snapshot)
		require.Len(t, inputs, 2)
		require.Equal(t, []string{"b11.jsonl", "b12.jsonl"}, []string{inputs[0].Name, inputs[1].Name})
	})
	require.Equal(t, before, c.state(), "rerun changed the database")
	c.requireWhole()
	left, _ := filepath.Glob(c.db + ".rerun-*")
	require.Empty(t, left, "rerun left its scratch folder")
}

// TestRerunCheckpointTampered: a checkpoint file whose bytes changed or
// that is gone is refused (exit 3, the message names the file) before
// anything is replayed, and nothing is written; FromStart still replays
// the whole chain from the retained inputs.
func TestRerunCheckpointTampered(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		part   string
		tamper func(t *testing.T, path string)
		want   string
	}{
		{"changed target", "target", func(t *testing.T, p string) {
			require.NoError(t, os.Chmod(p, 0o644))
			f, err := os.OpenFile(p, os.O_APPEND|os.O_WRONLY, 0)
			require.NoError(t, err)
			_, err = f.WriteString("x")
			require.NoError(t, err)
			require.NoError(t, f.Close())
		}, "was changed"},
		{"removed ledger", "idem.ledger", func(t *testing.T, p string) { require.NoError(t, os.Remove(p)) }, "cannot be read"},
		{"removed manifest", "manifest", func(t *testing.T, p string) { require.NoError(t, os.Remove(p)) }, "cannot be read"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := checkpointChain(t, 12)
			cs := c.checkpoints()
			require.Len(t, cs, 2)
			cp := cs[1] // snapshot 10
			path := source.RetainedPath(c.db, cp.SHA256)
			if tc.part != "manifest" {
				path = c.part(cp, tc.part)
			}
			tc.tamper(t, path)
			before := c.state()
			_, err := c.rerunErr(history.RerunOptions{Snapshot: 12})
			require.Error(t, err)
			require.Equal(t, report.ExitRefused, report.ExitCode(err), "%v", err)
			require.Contains(t, err.Error(), "checkpoint 10 of cs: file "+path)
			require.Contains(t, err.Error(), tc.want)
			require.Contains(t, err.Error(), "--from-start")
			require.Equal(t, before, c.state(), "a refused rerun changed the database")

			if tc.part == "target" {
				res := c.rerun(history.RerunOptions{Snapshot: 12, FromStart: true})
				require.Equal(t, 12, res.Replayed)
				require.Zero(t, res.FromCheckpoint)
			}
			// An older checkpoint is untouched and still used.
			res := c.rerun(history.RerunOptions{Snapshot: 7})
			require.Equal(t, int64(5), res.FromCheckpoint)
			require.Equal(t, before, c.state())
		})
	}
}

// TestRerunFromStartMissingInput: FromStart needs every retained input;
// one gone fails (exit 1) naming it, while a rerun from a checkpoint after
// that batch does not need it.
func TestRerunFromStartMissingInput(t *testing.T) {
	t.Parallel()
	c := checkpointChain(t, 7)
	sum := c.query(`SELECT json_extract_string(inputs, '$.files[0].sha256') FROM idem.snapshots WHERE snapshot = 2`)[0]
	require.NoError(t, os.Remove(source.RetainedPath(c.db, sum)))
	_, err := c.rerunErr(history.RerunOptions{FromStart: true})
	require.Error(t, err)
	require.Equal(t, report.ExitFailure, report.ExitCode(err), "%v", err)
	require.Contains(t, err.Error(), "rerun: snapshot 2 of cs: retained input b2.jsonl ("+report.Short(sum)+") is missing")
	res := c.rerun(history.RerunOptions{})
	require.Equal(t, 2, res.Replayed)
	require.Equal(t, int64(5), res.FromCheckpoint)
}

// TestRerunCheckpointErasureRollback: erasures and rollbacks in the chain,
// some of them checkpointed snapshots themselves, still reproduce from a
// checkpoint; an erasure rewrites the checkpoints without the subject; a
// rollback to before a checkpoint makes the rerun start from an older one.
// By default one rerun of each kind of snapshot (an erasure, a rollback
// onto a checkpoint, an apply after it, an erasure after a checkpoint, a
// rollback to before checkpoints) and the whole chain from the start;
// IDEM_LONG=1 also reruns 14 and 19, applies after an erasure and after a
// rollback (both replayed within the FromStart rerun by default).
func TestRerunCheckpointErasureRollback(t *testing.T) {
	t.Parallel()
	c := checkpointChain(t, 12)
	key := "e7"
	require.NotEmpty(t, c.query(`SELECT entity_id FROM read_parquet(?) WHERE entity_id = ?`, c.part(c.checkpoints()[0], "target"), key))
	c.erase(key)        // 13
	c.apply(13, "")     // 14
	c.rollback(12)      // 15: a checkpoint
	c.apply(14, "")     // 16
	c.erase("e8")       // 17
	c.rollback(7)       // 18: before checkpoints 10 and 15
	c.apply(2, "again") // 19

	cs := c.checkpoints()
	require.Len(t, cs, 3)
	for _, cp := range cs {
		for _, k := range []string{key, "e8"} {
			require.Empty(t, c.query(`SELECT entity_id FROM read_parquet(?) WHERE entity_id = ?`, c.part(cp, "target"), k),
				"checkpoint %d still holds erased key %s", cp.Snapshot, k)
		}
	}
	c.requireWhole()
	before := c.state()
	for _, tc := range []struct {
		snapshot int64
		replayed int
		from     int64
		long     bool
	}{
		{13, 3, 10, false},
		{14, 4, 10, true},
		{15, 0, 15, false},
		{16, 1, 15, true},
		{17, 2, 15, false},
		{18, 13, 5, false},
		{19, 14, 5, true},
	} {
		if tc.long && os.Getenv("IDEM_LONG") != "1" {
			continue
		}
		t.Run(fmt.Sprint(tc.snapshot), func(t *testing.T) {
			res := c.rerun(history.RerunOptions{Snapshot: tc.snapshot})
			require.Equal(t, tc.replayed, res.Replayed)
			require.Equal(t, tc.from, res.FromCheckpoint)
		})
	}
	res := c.rerun(history.RerunOptions{FromStart: true})
	require.Equal(t, 19, res.Replayed)
	require.Equal(t, before, c.state())
}

// TestEraseDropsBrokenCheckpoint: an erasure is never blocked by a
// checkpoint whose target file is gone: that checkpoint is deleted with the
// files no other checkpoint names, and reruns start from the others.
func TestEraseDropsBrokenCheckpoint(t *testing.T) {
	t.Parallel()
	c := checkpointChain(t, 10)
	require.NoError(t, os.Remove(c.part(c.checkpoints()[0], "target")))
	c.erase("e7") // 11
	cs := c.checkpoints()
	require.Len(t, cs, 1)
	require.Equal(t, int64(10), cs[0].Snapshot)
	c.requireWhole()
	res := c.rerun(history.RerunOptions{Snapshot: 7})
	require.Equal(t, 7, res.Replayed)
	require.Zero(t, res.FromCheckpoint)
	res = c.rerun(history.RerunOptions{})
	require.Equal(t, 1, res.Replayed)
	require.Equal(t, int64(10), res.FromCheckpoint)
}
