package datatest

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/idem-dev/idem/internal/report"
	"github.com/idem-dev/idem/internal/run"

	"github.com/idem-dev/idem/cmd/idem/cli/internal/clitest"
	"github.com/idem-dev/idem/internal/history"
	"github.com/stretchr/testify/require"
)

// storeBytes is the size of the database file, its WAL and everything
// under its retained-input store.
func storeBytes(t *testing.T, db string) int64 {
	t.Helper()
	var n int64
	for _, p := range []string{db, db + ".wal"} {
		if st, err := os.Stat(p); err == nil {
			n += st.Size()
		}
	}
	_ = filepath.WalkDir(db+".inputs", func(_ string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if info, err := d.Info(); err == nil {
				n += info.Size()
			}
		}
		return nil
	})
	return n
}

// TestRetentionWithCheckpoints is issue 16's acceptance case: 30 batches
// with [retention] keep_snapshots = 5 and checkpoint_every = 5, expiring
// after each run. Every kept snapshot exports the sha256 it had when it
// was committed; every expired one is refused with exit 3; an expired
// batch under its id is already_committed; its content under a new id
// changes nothing a fold over all the batches would not; rerun of the
// latest snapshot reproduces it replaying at most 5 batches, and rerun of
// every kept one reproduces it; the checkpoints and retained inputs no
// kept snapshot's rerun needs are gone, from the tables and from the
// store; the same 30 batches without [retention] keep more bytes.
func TestRetentionWithCheckpoints(t *testing.T) {
	t.Parallel()
	// 10 batches by default, 30 with IDEM_LONG=1 (the same checks: every
	// count below follows from batches).
	batches := clitest.LongOr(10, 30)
	last := int64(batches)
	oldest := last - 4 // the oldest kept snapshot
	ckpt := oldest - 1 // the checkpoint snapshots oldest..last-1 rerun from
	build := func(t *testing.T, retention string) (dir, db, jobFile string, paths []string, lines [][]string, shas map[int64]string) {
		dir = t.TempDir()
		db = filepath.Join(dir, "trips.duckdb")
		jobFile = filepath.Join(dir, "trips.toml")
		expireJob(t, jobFile, db, 0)
		if retention != "" {
			f, err := os.OpenFile(jobFile, os.O_APPEND|os.O_WRONLY, 0)
			require.NoError(t, err)
			_, err = f.WriteString(retention)
			require.NoError(t, errors.Join(err, f.Close()))
		}
		paths, lines = expireBatches(t, dir, batches, 200, 400)
		shas = map[int64]string{}
		for i, p := range paths {
			r := clitest.CallIdem(t, "run", jobFile, "--input", p, "--json")
			require.Equal(t, 0, r.Code, r.Stderr)
			// The sha256 of each snapshot that stays kept, as committed,
			// before any expiry could touch it: the latest is never expired.
			if int64(i+1) >= oldest {
				shas[int64(i+1)] = exportSHA(t, jobFile, dir, int64(i+1))
			}
		}
		return
	}
	dir, db, jobFile, paths, lines, shas := build(t, "[retention]\nkeep_snapshots = 5\ncheckpoint_every = 5\n")
	if clitest.LongTests() {
		// The same batches without [retention]: the same snapshots.
		_, plainDB, _, _, _, plainSHA := build(t, "")
		require.Equal(t, plainSHA, shas, "retention changed what a snapshot holds")
		t.Logf("database + retained inputs after %d batches: %d bytes without [retention], %d with keep_snapshots = 5, checkpoint_every = 5",
			batches, storeBytes(t, plainDB), storeBytes(t, db))
	}

	require.Equal(t, []int64{oldest}, clitest.QueryInts(t, db, `SELECT oldest_kept FROM idem.retention WHERE job = 'trips'`))
	// Snapshots 26-29 rerun from checkpoint 25, snapshot 30 is one: the
	// other checkpoints are gone.
	require.Equal(t, []int64{ckpt, last}, clitest.QueryInts(t, db, `SELECT snapshot FROM idem.checkpoints ORDER BY snapshot`))
	for s := oldest; s <= last; s++ {
		require.Equal(t, shas[s], exportSHA(t, jobFile, dir, s), "kept snapshot %d", s)
	}
	// Every retained input left is one a kept snapshot's rerun replays or
	// a kept checkpoint's file, and the store holds exactly those.
	var want []string
	for _, s := range clitest.QueryStrs(t, db, `SELECT inputs FROM idem.snapshots WHERE job = 'trips' AND snapshot > ? ORDER BY snapshot`, ckpt) {
		var in struct {
			Files []struct{ SHA256 string } `json:"files"`
		}
		require.NoError(t, json.Unmarshal([]byte(s), &in))
		for _, f := range in.Files {
			want = append(want, f.SHA256)
		}
	}
	want = append(want, clitest.QueryStrs(t, db, `SELECT sha256 FROM idem.checkpoints`)...)
	for _, files := range clitest.QueryStrs(t, db, `SELECT files FROM idem.checkpoints`) {
		var fs []struct{ SHA256 string }
		require.NoError(t, json.Unmarshal([]byte(files), &fs))
		for _, f := range fs {
			want = append(want, f.SHA256)
		}
	}
	sort.Strings(want)
	want = slices.Compact(want) // checkpoints of one job may share a file
	require.ElementsMatch(t, want, clitest.QueryStrs(t, db, `SELECT sha256 FROM idem.inputs`))
	var stored []string
	require.NoError(t, filepath.WalkDir(db+".inputs", func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			stored = append(stored, d.Name())
		}
		return err
	}))
	require.Len(t, stored, len(want), "the store holds only what the tables name: %v", stored)

	// Every expired snapshot is refused, every export, diff and rerun.
	state := clitest.CaptureState(t, db)
	for _, s := range []int64{1, 5, ckpt} {
		msg := fmt.Sprintf("snapshot %d of trips expired (oldest kept: %d)", s, oldest)
		for _, args := range [][]string{
			{"export", jobFile, "--snapshot", fmt.Sprint(s), "--out", filepath.Join(dir, "x.csv")},
			{"diff", jobFile, "--from", fmt.Sprint(s), "--to", fmt.Sprint(last)},
			{"rerun", jobFile, "--snapshot", fmt.Sprint(s)},
			{"rollback", jobFile, "--to-snapshot", fmt.Sprint(s)},
		} {
			r := clitest.CallIdem(t, args...)
			require.Equal(t, report.ExitRefused, r.Code, "%v: %s", args, r.Stderr)
			require.Contains(t, r.Stderr, msg, "%v", args)
		}
	}
	require.Equal(t, state, clitest.CaptureState(t, db), "a refused read changed the database")

	// Rerun: the latest from its own checkpoint, the others from 25.
	for s := oldest; s <= last; s++ {
		r := clitest.CallIdem(t, "rerun", jobFile, "--snapshot", fmt.Sprint(s), "--json")
		require.Equal(t, 0, r.Code, "rerun %d: %s", s, r.Stderr)
		var res history.RerunResult
		require.NoError(t, json.Unmarshal([]byte(r.Stdout), &res))
		require.True(t, res.Reproduced, "rerun of snapshot %d", s)
		require.Equal(t, shas[s], res.SHA256)
		require.LessOrEqual(t, res.Replayed, 5, "rerun of snapshot %d replayed %d batches", s, res.Replayed)
		require.Equal(t, int(s-ckpt)%5, res.Replayed, "rerun of snapshot %d", s)
	}
	// --from-start needs inputs that expired: refused, nothing written.
	r := clitest.CallIdem(t, "rerun", jobFile, "--from-start")
	require.NotEqual(t, 0, r.Code)
	require.Contains(t, r.Stderr, "missing")
	require.Equal(t, state, clitest.CaptureState(t, db))

	// An expired batch under its id: already_committed, nothing written.
	r = clitest.CallIdem(t, "run", jobFile, "--input", paths[2], "--json")
	require.Equal(t, 0, r.Code, r.Stderr)
	require.Contains(t, r.Stdout, `"decision":"already_committed"`)
	require.Equal(t, state, clitest.CaptureState(t, db))

	// Its content under a new id changes nothing a fold of every batch
	// (the replay included) would not.
	fold := vcFold{}
	for _, l := range lines {
		fold.apply(l)
	}
	r = clitest.CallIdem(t, "run", jobFile, "--input", paths[2], "--batch-id", "replay-3", "--json")
	require.Equal(t, 0, r.Code, r.Stderr)
	var res run.Result
	require.NoError(t, json.Unmarshal([]byte(r.Stdout), &res))
	require.Zero(t, res.Outcomes["accepted"], "an old batch under a new id brought something back: %v", res.Outcomes)
	fold.apply(lines[2])
	require.Equal(t, fold.rows(), clitest.QueryStrs(t, db, `SELECT entity_id || '|' || source_version || '|' || status || '|' || coalesce(value, '') FROM trips ORDER BY entity_id`))
	require.Equal(t, shas[last], exportSHA(t, jobFile, dir, last+1))
	r = clitest.CallIdem(t, "rerun", jobFile, "--json")
	require.Equal(t, 0, r.Code, r.Stderr)
	require.Contains(t, r.Stdout, `"reproduced":true`)
	require.Contains(t, r.Stdout, `"replayed":1`)
	require.True(t, strings.Count(r.Stdout, "sha256") > 0)
}
