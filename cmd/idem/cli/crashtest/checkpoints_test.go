package crashtest

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/idem-dev/idem/cmd/idem/cli/internal/clitest"
	"github.com/idem-dev/idem/internal/catalog"
	"github.com/idem-dev/idem/internal/history"
	"github.com/idem-dev/idem/internal/report"
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
	clitest.WriteText(t, j.file, fmt.Sprintf(`name = "cs"
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
`+clitest.DuckdbSection, every))
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
		clitest.WriteText(t, filepath.Join(dir, fmt.Sprintf("b%d.jsonl", b)), sb.String())
	}
	return j
}

// ckptJobAt is the ckptJob in folder dir.
func ckptJobAt(t *testing.T, dir string) *ckptJob {
	return &ckptJob{t: t, dir: dir, db: filepath.Join(dir, "ck.duckdb"), file: filepath.Join(dir, "job.toml")}
}

// ckptChainAt are the points of the shared checkpoint chain a test can
// start from: the number of batches applied. (internal/history tests the
// reruns of a longer chain through the library.)
var ckptChainAt = []int{4, 7}

var ckptChainFixture clitest.Once[map[int]string]

// checkpointChain is a copy, in a folder of the test's own, of the chain of
// newCheckpointJob(every 5) after batches 1..applied (one of ckptChainAt),
// built once per package run and shared by the checkpoint tests. Every
// batch file b1..b8 is there.
func checkpointChain(t *testing.T, applied int) *ckptJob {
	t.Helper()
	dirs := ckptChainFixture.Get(t, func(t *testing.T) map[int]string {
		j := newCheckpointJob(t, clitest.FixtureDir(t, "ckpt-chain"), 5, 8)
		out := map[int]string{}
		for b := 1; b <= 7; b++ {
			j.apply(b, "")
			if slices.Contains(ckptChainAt, b) {
				out[b] = clitest.FixtureDir(t, fmt.Sprintf("ckpt-chain-%d", b))
				clitest.CopyDir(t, j.dir, out[b])
			}
		}
		return out
	})
	src, ok := dirs[applied]
	require.True(t, ok, "the shared chain has no copy after %d batches", applied)
	j := ckptJobAt(t, filepath.Join(t.TempDir(), "ck"))
	clitest.CopyDir(t, src, j.dir)
	return j
}

// apply runs batch b under batch id id (default b<b>.jsonl).
func (j *ckptJob) apply(b int, id string) run.Result {
	j.t.Helper()
	args := []string{"run", j.file, "--input", filepath.Join(j.dir, fmt.Sprintf("b%d.jsonl", b)), "--json"}
	if id != "" {
		args = append(args, "--batch-id", id)
	}
	r := clitest.CallIdem(j.t, args...)
	require.Equal(j.t, 0, r.Code, "run batch %d: %s", b, r.Stderr)
	var res run.Result
	require.NoError(j.t, json.Unmarshal([]byte(r.Stdout), &res))
	require.Equal(j.t, report.DecisionApplied, res.Decision)
	return res
}

// rerun runs idem rerun --json with args and decodes a successful result.
func (j *ckptJob) rerun(args ...string) history.RerunResult {
	j.t.Helper()
	r := clitest.CallIdem(j.t, append([]string{"rerun", j.file, "--json"}, args...)...)
	require.Equal(j.t, 0, r.Code, "rerun %v: %s %s", args, r.Stdout, r.Stderr)
	var res history.RerunResult
	require.NoError(j.t, json.Unmarshal([]byte(r.Stdout), &res))
	require.True(j.t, res.Reproduced, "rerun %v did not reproduce", args)
	return res
}

// checkpoints are the job's idem.checkpoints rows.
func (j *ckptJob) checkpoints() []*catalog.Checkpoint {
	j.t.Helper()
	var out []*catalog.Checkpoint
	for _, s := range clitest.QueryInts(j.t, j.db, `SELECT snapshot FROM idem.checkpoints ORDER BY snapshot`) {
		files := clitest.QueryStrs(j.t, j.db, `SELECT files FROM idem.checkpoints WHERE snapshot = ?`, s)
		c := &catalog.Checkpoint{Job: "cs", Snapshot: s, SHA256: clitest.QueryStrs(j.t, j.db, `SELECT sha256 FROM idem.checkpoints WHERE snapshot = ?`, s)[0]}
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
	for _, s := range clitest.QueryStrs(j.t, j.db, `SELECT sha256 FROM idem.inputs`) {
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

// TestRerunFromCheckpointCLI: idem rerun of a job with checkpoints says
// where it started (human and JSON), --from-start replays the whole chain,
// a changed checkpoint file is refused with exit 3 naming it and the way
// out, and nothing is written. internal/history tests the reruns of longer
// chains, with erasures and rollbacks, through the library.
func TestRerunFromCheckpointCLI(t *testing.T) {
	t.Parallel()
	j := checkpointChain(t, 7)
	before := clitest.CaptureState(t, j.db)
	r := clitest.CallIdem(t, "rerun", j.file, "--snapshot", "7")
	require.Equal(t, 0, r.Code, r.Stderr)
	require.Contains(t, r.Stdout, "cs: snapshot 7 reproduced (2 snapshot(s) replayed from checkpoint 5)")
	res := j.rerun("--snapshot", "6")
	require.Equal(t, []any{1, int64(5)}, []any{res.Replayed, res.FromCheckpoint})
	res = j.rerun("--from-start")
	require.Equal(t, []any{7, int64(0)}, []any{res.Replayed, res.FromCheckpoint})
	require.Equal(t, before, clitest.CaptureState(t, j.db), "rerun changed the database")

	c := j.checkpoints()[0]
	require.NoError(t, os.Remove(j.part(c, "idem.ledger")))
	r = clitest.CallIdem(t, "rerun", j.file)
	require.Equal(t, report.ExitRefused, r.Code, "stdout %s stderr %s", r.Stdout, r.Stderr)
	require.Contains(t, r.Stderr, "checkpoint 5 of cs: file "+j.part(c, "idem.ledger"))
	require.Contains(t, r.Stderr, "--from-start")
	require.Equal(t, before, clitest.CaptureState(t, j.db), "a refused rerun changed the database")
	left, _ := filepath.Glob(j.db + ".rerun-*")
	require.Empty(t, left, "rerun left its scratch folder")
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
			before := clitest.CaptureState(t, w.db)
			r := clitest.RunCLI(t, w.dir, tc.fault, tc.args(w)...)
			require.True(t, r.Killed, "IDEM_FAULT=%s: not killed (exit %d) %s", tc.fault, r.Code, r.Stderr)
			require.Equal(t, before, clitest.CaptureState(t, w.db), "a command killed before COMMIT changed the database")
			require.Empty(t, w.checkpoints())

			r = clitest.CallIdem(t, tc.args(w)...)
			require.Equal(t, 0, r.Code, r.Stderr)
			require.Equal(t, []int64{5}, clitest.QueryInts(t, w.db, `SELECT snapshot FROM idem.jobs`))
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
