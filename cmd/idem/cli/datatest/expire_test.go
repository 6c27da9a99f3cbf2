package datatest

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/idem-dev/idem/internal/report"
	"github.com/idem-dev/idem/internal/run"

	"github.com/idem-dev/idem/cmd/idem/cli/internal/clitest"
	"github.com/idem-dev/idem/internal/export"
	"github.com/idem-dev/idem/internal/history"
	"github.com/idem-dev/idem/internal/storage"
	"github.com/stretchr/testify/require"
)

// vcFold is a Go fold of versioned change batches whose versions never
// tie (expireBatches makes them strictly increasing per entity): the
// highest version of each entity wins, a delete keeps a tombstone. It is
// the target as it must be, entity by entity, as "entity|version|status|value".
type vcFold map[string]vcFoldRow

type vcFoldRow struct {
	version int64
	deleted bool
	value   string
}

func (f vcFold) apply(lines []string) {
	for _, l := range lines {
		var c struct {
			Entity  string  `json:"entity_id"`
			Version int64   `json:"source_version"`
			Op      string  `json:"operation"`
			Value   *string `json:"value"`
		}
		if err := json.Unmarshal([]byte(l), &c); err != nil {
			panic(err)
		}
		if old, ok := f[c.Entity]; ok && old.version >= c.Version {
			continue
		}
		r := vcFoldRow{version: c.Version, deleted: c.Op == "delete"}
		if c.Value != nil {
			r.value = *c.Value
		}
		f[c.Entity] = r
	}
}

func (f vcFold) rows() []string {
	out := make([]string, 0, len(f))
	for e, r := range f {
		status := "active"
		if r.deleted {
			status = "deleted"
		}
		out = append(out, fmt.Sprintf("%s|%d|%s|%s", e, r.version, status, r.value))
	}
	sort.Strings(out)
	return out
}

// expireBatches writes n batches of versioned changes (perBatch rows over
// entities entities, about 10% deletes, some entities twice in a batch)
// into dir and returns their paths and lines. Versions grow per entity, so
// the fold above is the contract's result.
func expireBatches(t *testing.T, dir string, n, perBatch, entities int) ([]string, [][]string) {
	t.Helper()
	rng := rand.New(rand.NewPCG(16, 30))
	version := map[string]int64{}
	var paths []string
	var all [][]string
	for b := 1; b <= n; b++ {
		var lines []string
		for i := range perBatch {
			e := fmt.Sprintf("e%04d", rng.IntN(entities))
			version[e]++
			op, value := "upsert", fmt.Sprintf("%q", fmt.Sprintf("v%d-%d", b, i))
			if rng.IntN(10) == 0 {
				op, value = "delete", "null"
			}
			lines = append(lines, fmt.Sprintf(`{"change_id":"c%d-%d","entity_id":%q,"source_version":%d,"operation":%q,"value":%s}`,
				b, i, e, version[e], op, value))
		}
		p := filepath.Join(dir, fmt.Sprintf("batch-%02d.jsonl", b))
		clitest.WriteText(t, p, strings.Join(lines, "\n")+"\n")
		paths = append(paths, p)
		all = append(all, lines)
	}
	return paths, all
}

// expireJob writes a versioned_changes job file with an optional
// [retention] keep_snapshots.
func expireJob(t *testing.T, path, db string, keep int) {
	t.Helper()
	text := fmt.Sprintf(`name = "trips"
pipeline = "versioned_changes"
transform_version = 1
schema_version = 1
database = %q
[input]
format = "jsonl"
path = "unused.jsonl"
[target]
table = "trips"
`+clitest.DuckdbSection, db)
	if keep > 0 {
		text += fmt.Sprintf("[retention]\nkeep_snapshots = %d\n", keep)
	}
	clitest.WriteText(t, path, text)
}

func exportSHA(t *testing.T, jobFile, dir string, snapshot int64) string {
	t.Helper()
	r := clitest.CallIdem(t, "export", jobFile, "--snapshot", fmt.Sprint(snapshot), "--out", filepath.Join(dir, fmt.Sprintf("s%d.csv", snapshot)), "--json")
	require.Equal(t, 0, r.Code, "export snapshot %d: %s", snapshot, r.Stderr)
	var res export.Result
	require.NoError(t, json.Unmarshal([]byte(r.Stdout), &res), r.Stdout)
	return res.SHA256
}

func duJSON(t *testing.T, jobFile string) storage.DUResult {
	t.Helper()
	r := clitest.CallIdem(t, "du", jobFile, "--json")
	require.Equal(t, 0, r.Code, r.Stderr)
	var res storage.DUResult
	require.NoError(t, json.Unmarshal([]byte(r.Stdout), &res), r.Stdout)
	return res
}

// TestExpireManyBatches: 12 batches of 250 versioned changes, then expiry
// to the newest 3 (IDEM_LONG=1: 30 batches of 100, expired to the newest 5;
// the rows expired and kept are about the same, so is what du must see
// come down). A dry run changes nothing; every kept snapshot exports
// the sha256 it had before; every expired one is refused (exit 3, the
// message, nothing changed) by export, diff, rerun, rollback and show;
// du shows the space coming down; an expired batch replayed under its id
// is already_committed; its content under a new id leaves the target equal
// to a Go fold of all the batches; a run with [retention] expires on its
// own; rerun of the latest still reproduces it; idem log lists every run.
func TestExpireManyBatches(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := filepath.Join(dir, "trips.duckdb")
	jobFile := filepath.Join(dir, "trips.toml")
	expireJob(t, jobFile, db, 0)
	// n batches of per rows, keep kept: the first n-keep expire.
	n, per, keep := int64(clitest.LongOr(12, 30)), int64(clitest.LongOr(250, 100)), int64(clitest.LongOr(3, 5))
	oldest := n - keep + 1 // the oldest snapshot kept
	paths, batches := expireBatches(t, dir, int(n), int(per), 300)
	fold := vcFold{}
	for i, p := range paths {
		r := clitest.CallIdem(t, "run", jobFile, "--input", p, "--json")
		require.Equal(t, 0, r.Code, r.Stderr)
		require.NotContains(t, r.Stdout, `"expiry"`, "no [retention]: no expiry")
		fold.apply(batches[i])
	}
	// The kept snapshots' exports before expiry (an expired one's is
	// refused below, whatever it was).
	want := map[int64]string{}
	for s := oldest; s <= n; s++ {
		want[s] = exportSHA(t, jobFile, dir, s)
	}
	targetRows := func() []string {
		return clitest.QueryStrs(t, db, `SELECT entity_id || '|' || source_version || '|' || status || '|' || coalesce(value, '') FROM trips ORDER BY entity_id`)
	}
	require.Equal(t, fold.rows(), targetRows(), "the target is the fold of the %d batches", n)
	before := duJSON(t, jobFile)
	require.Len(t, before.Snapshots, int(n-1))
	require.Equal(t, int64(1), before.OldestKept)

	// A dry run reports and changes nothing.
	state := clitest.CaptureState(t, db)
	r := clitest.CallIdem(t, "expire", jobFile, "--keep-snapshots", fmt.Sprint(keep), "--dry-run", "--json")
	require.Equal(t, 0, r.Code, r.Stderr)
	var dry history.ExpireResult
	require.NoError(t, json.Unmarshal([]byte(r.Stdout), &dry))
	require.True(t, dry.DryRun)
	require.Equal(t, oldest, dry.OldestKept)
	require.Equal(t, n-keep, dry.Expired)
	require.Positive(t, dry.HistoryRows)
	require.Equal(t, (n-keep)*per, dry.OutcomeRows)
	require.Zero(t, dry.Inputs, "an apply job's rerun replays from snapshot 1: its inputs stay")
	require.Equal(t, state, clitest.CaptureState(t, db), "--dry-run changed the database")

	// Without --keep-snapshots and without [retention]: a usage error.
	r = clitest.CallIdem(t, "expire", jobFile)
	require.Equal(t, report.ExitUsage, r.Code, r.Stderr)
	require.Contains(t, r.Stderr, "--keep-snapshots N")

	expireJob(t, jobFile, db, int(keep))
	r = clitest.CallIdem(t, "expire", jobFile, "--json")
	require.Equal(t, 0, r.Code, r.Stderr)
	var done history.ExpireResult
	require.NoError(t, json.Unmarshal([]byte(r.Stdout), &done))
	dry.DryRun = false
	require.Equal(t, dry, done, "the expiry did what its dry run said")
	require.Equal(t, []int64{before.Rows.History - done.HistoryRows}, clitest.QueryInts(t, db, `SELECT count(*) FROM idem."trips__history"`))
	require.Equal(t, []int64{keep * per}, clitest.QueryInts(t, db, `SELECT count(*) FROM trips_outcomes`))
	require.Equal(t, []int64{n, n, keep}, clitest.QueryInts(t, db, `SELECT count(*) FROM idem.ledger UNION ALL SELECT count(*) FROM idem.snapshots UNION ALL SELECT count(*) FROM idem.packets ORDER BY 1 DESC`))

	// Expiring again finds nothing due and commits nothing.
	state = clitest.CaptureState(t, db)
	r = clitest.CallIdem(t, "expire", jobFile)
	require.Equal(t, 0, r.Code, r.Stderr)
	require.Contains(t, r.Stdout, "nothing to expire")
	require.Equal(t, state, clitest.CaptureState(t, db))

	for s := oldest; s <= n; s++ {
		require.Equal(t, want[s], exportSHA(t, jobFile, dir, s), "kept snapshot %d exports as before expiry", s)
	}
	after := duJSON(t, jobFile)
	require.Equal(t, oldest, after.OldestKept)
	require.Len(t, after.Snapshots, int(keep-1))
	require.Less(t, after.Rows.History, before.Rows.History)
	require.Less(t, after.Rows.Outcomes, before.Rows.Outcomes)
	require.Less(t, after.Bytes.History+after.Bytes.Outcomes, before.Bytes.History+before.Bytes.Outcomes, "du shows the space coming down")
	require.Equal(t, before.Bytes.Inputs, after.Bytes.Inputs)
	t.Logf("du before: %+v", before.Bytes)
	t.Logf("du after:  %+v", after.Bytes)

	// Every reader of an expired snapshot is refused, and changes nothing.
	state = clitest.CaptureState(t, db)
	for _, s := range []int64{1, oldest - 1} {
		msg := fmt.Sprintf("snapshot %d of trips expired (oldest kept: %d)", s, oldest)
		out := filepath.Join(dir, fmt.Sprintf("expired-%d.csv", s))
		for _, args := range [][]string{
			{"export", jobFile, "--snapshot", fmt.Sprint(s), "--out", out},
			{"export", jobFile, "--snapshot", fmt.Sprint(s), "--out", out, "--table", "trips_outcomes"},
			{"diff", jobFile, "--from", fmt.Sprint(s), "--to", fmt.Sprint(n)},
			{"rerun", jobFile, "--snapshot", fmt.Sprint(s)},
			{"rollback", jobFile, "--to-snapshot", fmt.Sprint(s)},
			{"show", jobFile, "--snapshot", fmt.Sprint(s)},
		} {
			t.Run(strings.Join(args[:1], "")+fmt.Sprint(s), func(t *testing.T) {
				r := clitest.CallIdem(t, args...)
				require.Equal(t, report.ExitRefused, r.Code, "%v: %s%s", args, r.Stdout, r.Stderr)
				require.Contains(t, r.Stderr, msg)
				require.NoFileExists(t, out)
			})
		}
	}
	require.Equal(t, state, clitest.CaptureState(t, db), "a refused read changed the database")

	// An expired batch under its id: already_committed, nothing written.
	r = clitest.CallIdem(t, "run", jobFile, "--input", paths[2], "--json")
	require.Equal(t, 0, r.Code, r.Stderr)
	require.Contains(t, r.Stdout, `"decision":"already_committed"`)
	require.Equal(t, state, clitest.CaptureState(t, db))

	// Its content under a new id: every row is stale or superseded, and the
	// target is still the fold of all the batches (the replay included).
	// The run expires on its own ([retention] keep_snapshots = 5).
	r = clitest.CallIdem(t, "run", jobFile, "--input", paths[2], "--batch-id", "replay-3", "--json")
	require.Equal(t, 0, r.Code, r.Stderr)
	var res run.Result
	require.NoError(t, json.Unmarshal([]byte(r.Stdout), &res))
	require.Equal(t, report.DecisionApplied, res.Decision)
	require.Zero(t, res.Outcomes["accepted"], "an old batch under a new id brought something back: %v", res.Outcomes)
	fold.apply(batches[2])
	require.Equal(t, fold.rows(), targetRows())
	require.Equal(t, want[n], exportSHA(t, jobFile, dir, n+1))
	require.Equal(t, &run.Expiry{OldestKept: oldest + 1, Expired: 1}, res.Expiry)
	r = clitest.CallIdem(t, "export", jobFile, "--snapshot", fmt.Sprint(oldest), "--out", filepath.Join(dir, "gone.csv"))
	require.Equal(t, report.ExitRefused, r.Code)
	require.Contains(t, r.Stderr, fmt.Sprintf("snapshot %d of trips expired (oldest kept: %d)", oldest, oldest+1))

	// The latest snapshot is still rebuilt from the retained inputs.
	r = clitest.CallIdem(t, "rerun", jobFile, "--json")
	require.Equal(t, 0, r.Code, r.Stderr)
	require.Contains(t, r.Stdout, `"reproduced":true`)

	// The run log keeps every run, and says what each expiry removed.
	r = clitest.CallIdem(t, "log", jobFile, "--json")
	require.Equal(t, 0, r.Code, r.Stderr)
	require.Equal(t, int(n+1), strings.Count(r.Stdout, `"decision":"applied"`))
	require.Equal(t, 2, strings.Count(r.Stdout, `"decision":"expired"`))
	require.NoError(t, os.Remove(filepath.Join(dir, fmt.Sprintf("s%d.csv", n+1))))
}

// TestExpireKeepsDownstreamPin: in the chain vc → src → down (down applies
// the changes of src between the snapshot it pinned and src's latest), src
// keeps one snapshot. While down has not read past src's snapshot 1, src's
// expiry keeps it (held_by down), so down's next incremental read gets
// every change and ends as the same chain without retention does; once
// down has read on, and keeps a checkpoint of its latest snapshot and only
// that snapshot (so that no rerun of a kept snapshot of down reads src's
// snapshot 1 either: TestExpireKeepsRerunPins), the old snapshot expires.
func TestExpireKeepsDownstreamPin(t *testing.T) {
	t.Parallel()
	final := func(t *testing.T, keep bool) ([]string, []string) {
		dir := t.TempDir()
		upstreamApplyProject(t, dir)
		db := filepath.Join(dir, "chain.duckdb")
		jobs := filepath.Join(dir, "jobs")
		src, down := filepath.Join(jobs, "src.toml"), filepath.Join(jobs, "down.toml")
		if keep {
			text, err := os.ReadFile(src)
			require.NoError(t, err)
			clitest.WriteText(t, src, string(text)+"[retention]\nkeep_snapshots = 1\n")
			text, err = os.ReadFile(down)
			require.NoError(t, err)
			clitest.WriteText(t, down, string(text)+"[retention]\nkeep_snapshots = 1\ncheckpoint_every = 1\n")
		}
		code, out, errOut := clitest.InProcess(t, "run", jobs)
		require.Equal(t, 0, code, out+errOut)
		// Two more changes of vc and src that down does not read yet.
		for i, change := range []string{
			`{"change_id":"3","entity_id":"a","source_version":2,"operation":"upsert","value":"a2"}`,
			`{"change_id":"4","entity_id":"b","source_version":2,"operation":"delete","value":null}`,
		} {
			clitest.WriteFile(t, filepath.Join(dir, "changes", fmt.Sprintf("b%d.jsonl", i+2)), change+"\n")
			for _, j := range []string{"vc", "src"} {
				code, out, errOut := clitest.InProcess(t, "run", filepath.Join(jobs, j+".toml"))
				require.Equal(t, 0, code, out+errOut)
			}
		}
		if keep {
			r := clitest.CallIdem(t, "expire", src, "--json")
			require.Equal(t, 0, r.Code, r.Stderr)
			var res history.ExpireResult
			require.NoError(t, json.Unmarshal([]byte(r.Stdout), &res))
			require.Equal(t, map[string]int64{"down": 1}, res.HeldBy)
			require.Equal(t, []history.Pin{{Job: "down", Snapshot: 1}}, res.Pins)
			require.Equal(t, int64(1), res.OldestKept, "down's next read starts at src snapshot 1")
			require.Equal(t, int64(3), res.Latest)
		}
		code, out, errOut = clitest.InProcess(t, "run", down)
		require.Equal(t, 0, code, out+errOut)
		require.Contains(t, out, "upstream:src:1-3")
		if keep {
			r := clitest.CallIdem(t, "expire", src, "--json")
			require.Equal(t, 0, r.Code, r.Stderr)
			require.Contains(t, r.Stdout, `"oldest_kept":3`)
			r = clitest.CallIdem(t, "export", src, "--snapshot", "2", "--out", filepath.Join(dir, "src2.csv"))
			require.Equal(t, report.ExitRefused, r.Code)
			require.Contains(t, r.Stderr, "snapshot 2 of src expired (oldest kept: 3)")
		}
		return clitest.QueryStrs(t, db, `SELECT entity_id || ' ' || coalesce(value, '') FROM down ORDER BY ALL`),
			clitest.QueryStrs(t, db, `SELECT entity_id || ' ' || idem_order FROM down_tombstones ORDER BY ALL`)
	}
	var rows, tombs [2][]string
	for i, keep := range []bool{false, true} {
		t.Run(fmt.Sprintf("keep=%v", keep), func(t *testing.T) {
			rows[i], tombs[i] = final(t, keep)
		})
	}
	require.Equal(t, []string{"a a2"}, rows[0])
	require.Equal(t, rows[0], rows[1])
	require.Equal(t, tombs[0], tombs[1])
}
