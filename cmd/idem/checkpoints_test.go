package main

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/idem-dev/idem/internal/catalog"
	"github.com/idem-dev/idem/internal/job"
	"github.com/idem-dev/idem/internal/ops"
	"github.com/idem-dev/idem/internal/run"
	"github.com/idem-dev/idem/internal/source"
	"github.com/stretchr/testify/require"
)

// ckptJob is a versioned_changes job with [retention] checkpoint_every in
// its own folder, with generated batches b1.jsonl, b2.jsonl ...
type ckptJob struct {
	t    *testing.T
	dir  string
	db   string
	file string
}

func newCheckpointJob(t *testing.T, dir string, every, batches int) *ckptJob {
	t.Helper()
	j := ckptJobAt(t, dir)
	writeText(t, j.file, fmt.Sprintf(`name = "cs"
pipeline = "versioned_changes"
transform_version = 1
schema_version = 1
database = "ck.duckdb"

[input]
path = "b1.jsonl"

[target]
table = "cs"

[retention]
checkpoint_every = %d
`+duckdbSection, every))
	// Batches over 40 entities: versions overlap from batch to batch (some
	// stale), entities repeat within a batch (superseded), some deletes.
	rng := rand.New(rand.NewPCG(16, 2))
	for b := 1; b <= batches; b++ {
		var sb strings.Builder
		for i := range 25 {
			op := "upsert"
			if rng.IntN(10) == 0 {
				op = "delete"
			}
			fmt.Fprintf(&sb, `{"change_id":"c%d-%d","entity_id":"e%d","source_version":%d,"operation":%q,"value":"v%d"}`+"\n",
				b, i, rng.IntN(40), b*100+rng.IntN(150), op, rng.IntN(4))
		}
		writeText(t, filepath.Join(dir, fmt.Sprintf("b%d.jsonl", b)), sb.String())
	}
	return j
}

// ckptJobAt is the ckptJob in folder dir.
func ckptJobAt(t *testing.T, dir string) *ckptJob {
	return &ckptJob{t: t, dir: dir, db: filepath.Join(dir, "ck.duckdb"), file: filepath.Join(dir, "job.toml")}
}

// ckptChainAt are the points of the shared checkpoint chain a test can
// start from: the number of batches applied.
var ckptChainAt = []int{4, 7, 10, 12, 15}

var ckptChainFixture once[map[int]string]

// checkpointChain is a copy, in a folder of the test's own, of the chain of
// newCheckpointJob(every 5, 15 batches) after batches 1..applied (one of
// ckptChainAt), built once per package run and shared by the checkpoint
// tests. Every batch file b1..b15 is there.
func checkpointChain(t *testing.T, applied int) *ckptJob {
	t.Helper()
	dirs := ckptChainFixture.get(t, func(t *testing.T) map[int]string {
		j := newCheckpointJob(t, fixtureDir(t, "ckpt-chain"), 5, 15)
		out := map[int]string{}
		for b := 1; b <= 15; b++ {
			j.apply(b, "")
			if slices.Contains(ckptChainAt, b) {
				out[b] = fixtureDir(t, fmt.Sprintf("ckpt-chain-%d", b))
				copyDir(t, j.dir, out[b])
			}
		}
		return out
	})
	src, ok := dirs[applied]
	require.True(t, ok, "the shared chain has no copy after %d batches", applied)
	j := ckptJobAt(t, filepath.Join(t.TempDir(), "ck"))
	copyDir(t, src, j.dir)
	return j
}

// apply runs batch b under batch id id (default b<b>.jsonl).
func (j *ckptJob) apply(b int, id string) run.Result {
	j.t.Helper()
	args := []string{"run", j.file, "--input", filepath.Join(j.dir, fmt.Sprintf("b%d.jsonl", b)), "--json"}
	if id != "" {
		args = append(args, "--batch-id", id)
	}
	r := callIdem(j.t, args...)
	require.Equal(j.t, 0, r.code, "run batch %d: %s", b, r.stderr)
	var res run.Result
	require.NoError(j.t, json.Unmarshal([]byte(r.stdout), &res))
	require.Equal(j.t, job.DecisionApplied, res.Decision)
	return res
}

// rerun runs idem rerun --json with args and decodes a successful result.
func (j *ckptJob) rerun(args ...string) ops.RerunResult {
	j.t.Helper()
	r := callIdem(j.t, append([]string{"rerun", j.file, "--json"}, args...)...)
	require.Equal(j.t, 0, r.code, "rerun %v: %s %s", args, r.stdout, r.stderr)
	var res ops.RerunResult
	require.NoError(j.t, json.Unmarshal([]byte(r.stdout), &res))
	require.True(j.t, res.Reproduced, "rerun %v did not reproduce", args)
	return res
}

// checkpoints are the job's idem.checkpoints rows.
func (j *ckptJob) checkpoints() []*catalog.Checkpoint {
	j.t.Helper()
	var out []*catalog.Checkpoint
	for _, s := range queryInts(j.t, j.db, `SELECT snapshot FROM idem.checkpoints ORDER BY snapshot`) {
		files := queryStrs(j.t, j.db, `SELECT files FROM idem.checkpoints WHERE snapshot = ?`, s)
		c := &catalog.Checkpoint{Job: "cs", Snapshot: s, SHA256: queryStrs(j.t, j.db, `SELECT sha256 FROM idem.checkpoints WHERE snapshot = ?`, s)[0]}
		require.NoError(j.t, json.Unmarshal([]byte(files[0]), &c.Files))
		out = append(out, c)
	}
	return out
}

// part is the store path of checkpoint c's part.
func (j *ckptJob) part(c *catalog.Checkpoint, part string) string {
	for _, f := range c.Files {
		if f.Part == part {
			return source.RetainedPath(j.db, f.SHA256)
		}
	}
	j.t.Fatalf("checkpoint %d has no part %s", c.Snapshot, part)
	return ""
}

// requireWhole requires that every checkpoint row's files and manifest are
// in the store with their recorded bytes and recorded in idem.inputs, and
// that the store holds no file idem.inputs does not name.
func (j *ckptJob) requireWhole() {
	j.t.Helper()
	named := map[string]bool{}
	for _, s := range queryStrs(j.t, j.db, `SELECT sha256 FROM idem.inputs`) {
		named[s] = true
	}
	for _, c := range j.checkpoints() {
		require.NoError(j.t, source.VerifyCheckpoint(j.t.Context(), j.db, c), "checkpoint %d", c.Snapshot)
		require.True(j.t, named[c.SHA256], "checkpoint %d: manifest not in idem.inputs", c.Snapshot)
		for _, f := range c.Files {
			require.True(j.t, named[f.SHA256], "checkpoint %d: %s not in idem.inputs", c.Snapshot, f.Part)
		}
	}
	require.NoError(j.t, filepath.WalkDir(j.db+".inputs", func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		require.True(j.t, named[d.Name()], "the store holds %s, which no idem.inputs row names", p)
		return nil
	}))
}

// TestRerunFromCheckpoint: 15 batches with checkpoint_every = 5 keep
// checkpoints 5, 10 and 15 (TestRetentionWithCheckpoints runs 30); a rerun starts from the nearest one at or
// before its snapshot, replays only the snapshots after it and reproduces
// the snapshot; --from-start replays all 30. The rerun writes nothing.
func TestRerunFromCheckpoint(t *testing.T) {
	t.Parallel()
	j := checkpointChain(t, 15)
	var snaps []int64
	for _, c := range j.checkpoints() {
		snaps = append(snaps, c.Snapshot)
	}
	require.Equal(t, []int64{5, 10, 15}, snaps)
	j.requireWhole()
	before := captureState(t, j.db)

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
			args := []string{"--snapshot", fmt.Sprint(tc.snapshot)}
			if tc.fromStart {
				args = append(args, "--from-start")
			}
			res := j.rerun(args...)
			require.Equal(t, tc.snapshot, res.Snapshot)
			require.Equal(t, tc.replayed, res.Replayed)
			require.Equal(t, tc.from, res.FromCheckpoint)
		})
	}
	// What a rerun of 12 reads: checkpoint 10 and the inputs of 11 and 12.
	db, err := run.Open(t.Context(), j.db, run.OpenOptions{ReadOnly: true})
	require.NoError(t, err)
	jb, err := loadJob(j.file)
	require.NoError(t, err)
	c, inputs, err := ops.RerunNeeds(t.Context(), db.SQL(), jb, 12)
	require.NoError(t, err)
	require.NoError(t, db.Close())
	require.Equal(t, int64(10), c.Snapshot)
	require.Len(t, inputs, 2)
	require.Equal(t, []string{"b11.jsonl", "b12.jsonl"}, []string{inputs[0].Name, inputs[1].Name})

	r := callIdem(t, "rerun", j.file, "--snapshot", "12")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "cs: snapshot 12 reproduced (2 snapshot(s) replayed from checkpoint 10)")
	require.Equal(t, before, captureState(t, j.db), "rerun changed the database")
	j.requireWhole()
	left, _ := filepath.Glob(j.db + ".rerun-*")
	require.Empty(t, left, "rerun left its scratch folder")
}

// TestRerunCheckpointTampered: a checkpoint file whose bytes changed or
// that is gone is refused (exit 3, the message names the file) before
// anything is replayed, and nothing is written; --from-start still
// replays the whole chain from the retained inputs.
func TestRerunCheckpointTampered(t *testing.T) {
	t.Parallel()
	j := checkpointChain(t, 12)
	cs := j.checkpoints()
	require.Len(t, cs, 2)
	for _, tc := range []struct {
		name   string
		part   string
		tamper func(path string)
		want   string
	}{
		{"changed target", "target", func(p string) {
			require.NoError(t, os.Chmod(p, 0o644))
			f, err := os.OpenFile(p, os.O_APPEND|os.O_WRONLY, 0)
			require.NoError(t, err)
			_, err = f.WriteString("x")
			require.NoError(t, err)
			require.NoError(t, f.Close())
		}, "was changed"},
		{"removed ledger", "idem.ledger", func(p string) { require.NoError(t, os.Remove(p)) }, "cannot be read"},
		{"removed manifest", "manifest", func(p string) { require.NoError(t, os.Remove(p)) }, "cannot be read"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			w := checkpointChain(t, 12)
			c := w.checkpoints()[1] // snapshot 10
			path := source.RetainedPath(w.db, c.SHA256)
			if tc.part != "manifest" {
				path = w.part(c, tc.part)
			}
			tc.tamper(path)
			before := captureState(t, w.db)
			r := callIdem(t, "rerun", w.file, "--snapshot", "12")
			require.Equal(t, job.ExitRefused, r.code, "stdout %s stderr %s", r.stdout, r.stderr)
			require.Contains(t, r.stderr, "checkpoint 10 of cs: file "+path)
			require.Contains(t, r.stderr, tc.want)
			require.Contains(t, r.stderr, "--from-start")
			require.Equal(t, before, captureState(t, w.db), "a refused rerun changed the database")

			if tc.part == "target" {
				res := w.rerun("--snapshot", "12", "--from-start")
				require.Equal(t, 12, res.Replayed)
				require.Zero(t, res.FromCheckpoint)
			}
			// An older checkpoint is untouched and still used.
			res := w.rerun("--snapshot", "7")
			require.Equal(t, int64(5), res.FromCheckpoint)
			require.Equal(t, before, captureState(t, w.db))
		})
	}
}

// TestRerunFromStartMissingInput: --from-start needs every retained input;
// one gone fails (exit 1) naming it, while a rerun from a checkpoint after
// that batch does not need it.
func TestRerunFromStartMissingInput(t *testing.T) {
	t.Parallel()
	j := checkpointChain(t, 7)
	sum := queryStrs(t, j.db, `SELECT json_extract_string(inputs, '$.files[0].sha256') FROM idem.snapshots WHERE snapshot = 2`)[0]
	require.NoError(t, os.Remove(source.RetainedPath(j.db, sum)))
	r := callIdem(t, "rerun", j.file, "--from-start")
	require.Equal(t, job.ExitFailure, r.code, r.stderr)
	require.Contains(t, r.stderr, "rerun: snapshot 2 of cs: retained input b2.jsonl ("+job.Short(sum)+") is missing")
	res := j.rerun()
	require.Equal(t, 2, res.Replayed)
	require.Equal(t, int64(5), res.FromCheckpoint)
}

// TestCheckpointKill: a run, an erasure or a rollback SIGKILLed once the
// checkpoint's files are in the store, before COMMIT, leaves the database as
// before (no checkpoint row) and files no row names; the same command run
// again sweeps them and commits the snapshot with its checkpoint, and a
// rerun starts from it.
func TestCheckpointKill(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, fault string
		args        func(w *ckptJob) []string
	}{
		{"run/" + run.FaultCheckpointFiles, run.FaultCheckpointFiles, func(w *ckptJob) []string {
			return []string{"run", w.file, "--input", filepath.Join(w.dir, "b5.jsonl")}
		}},
		{"run/" + run.FaultBeforeCommit, run.FaultBeforeCommit, func(w *ckptJob) []string {
			return []string{"run", w.file, "--input", filepath.Join(w.dir, "b5.jsonl")}
		}},
		{"rollback/" + run.FaultCheckpointFiles, run.FaultCheckpointFiles, func(w *ckptJob) []string {
			return []string{"rollback", w.file, "--to-snapshot", "2"}
		}},
		{"erase/" + run.FaultCheckpointFiles, run.FaultCheckpointFiles, func(w *ckptJob) []string {
			return []string{"erase", w.file, "--key", "e7"}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			w := checkpointChain(t, 4)
			before := captureState(t, w.db)
			r := runCLI(t, w.dir, tc.fault, tc.args(w)...)
			require.True(t, r.killed, "IDEM_FAULT=%s: not killed (exit %d) %s", tc.fault, r.code, r.stderr)
			require.Equal(t, before, captureState(t, w.db), "a command killed before COMMIT changed the database")
			require.Empty(t, w.checkpoints())

			r = callIdem(t, tc.args(w)...)
			require.Equal(t, 0, r.code, r.stderr)
			require.Equal(t, []int64{5}, queryInts(t, w.db, `SELECT snapshot FROM idem.jobs`))
			require.Len(t, w.checkpoints(), 1)
			w.requireWhole() // the killed command's files are swept
			rr := w.rerun()
			require.Equal(t, 0, rr.Replayed)
			require.Equal(t, int64(5), rr.FromCheckpoint)
			w.apply(6, "")
			rr = w.rerun()
			require.Equal(t, 1, rr.Replayed)
		})
	}
}

// TestRerunCheckpointErasureRollback: erasures and rollbacks in the chain,
// some of them checkpointed snapshots themselves, still reproduce from a
// checkpoint; an erasure rewrites the checkpoints without the subject; a
// rollback to before a checkpoint makes the rerun start from an older one.
func TestRerunCheckpointErasureRollback(t *testing.T) {
	t.Parallel()
	j := checkpointChain(t, 12)
	key := "e7"
	require.NotEmpty(t, queryStrs(t, j.db, `SELECT entity_id FROM read_parquet(?) WHERE entity_id = ?`, j.part(j.checkpoints()[0], "target"), key))
	r := callIdem(t, "erase", j.file, "--key", key) // 13
	require.Equal(t, 0, r.code, r.stderr)
	j.apply(13, "")                                            // 14
	r = callIdem(t, "rollback", j.file, "--to-snapshot", "12") // 15: a checkpoint
	require.Equal(t, 0, r.code, r.stderr)
	j.apply(14, "")                                 // 16
	r = callIdem(t, "erase", j.file, "--key", "e8") // 17
	require.Equal(t, 0, r.code, r.stderr)
	r = callIdem(t, "rollback", j.file, "--to-snapshot", "7") // 18: before checkpoints 10 and 15
	require.Equal(t, 0, r.code, r.stderr)
	j.apply(2, "again") // 19

	cs := j.checkpoints()
	require.Len(t, cs, 3)
	for _, c := range cs {
		for _, k := range []string{key, "e8"} {
			require.Empty(t, queryStrs(t, j.db, `SELECT entity_id FROM read_parquet(?) WHERE entity_id = ?`, j.part(c, "target"), k),
				"checkpoint %d still holds erased key %s", c.Snapshot, k)
		}
	}
	j.requireWhole()
	before := captureState(t, j.db)
	for _, tc := range []struct {
		snapshot int64
		replayed int
		from     int64
	}{
		{13, 3, 10},
		{14, 4, 10},
		{15, 0, 15},
		{16, 1, 15},
		{17, 2, 15},
		{18, 13, 5},
		{19, 14, 5},
	} {
		t.Run(fmt.Sprint(tc.snapshot), func(t *testing.T) {
			res := j.rerun("--snapshot", fmt.Sprint(tc.snapshot))
			require.Equal(t, tc.replayed, res.Replayed)
			require.Equal(t, tc.from, res.FromCheckpoint)
		})
	}
	res := j.rerun("--from-start")
	require.Equal(t, 19, res.Replayed)
	require.Equal(t, before, captureState(t, j.db))
}

// TestEraseDropsBrokenCheckpoint: an erasure is never blocked by a
// checkpoint whose target file is gone: that checkpoint is deleted with the
// files no other checkpoint names, and reruns start from the others.
func TestEraseDropsBrokenCheckpoint(t *testing.T) {
	t.Parallel()
	j := checkpointChain(t, 10)
	require.NoError(t, os.Remove(j.part(j.checkpoints()[0], "target")))
	r := callIdem(t, "erase", j.file, "--key", "e7") // 11
	require.Equal(t, 0, r.code, r.stderr)
	cs := j.checkpoints()
	require.Len(t, cs, 1)
	require.Equal(t, int64(10), cs[0].Snapshot)
	j.requireWhole()
	res := j.rerun("--snapshot", "7")
	require.Equal(t, 7, res.Replayed)
	require.Zero(t, res.FromCheckpoint)
	res = j.rerun()
	require.Equal(t, 1, res.Replayed)
	require.Equal(t, int64(10), res.FromCheckpoint)
}
