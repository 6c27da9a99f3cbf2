package run

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idem-dev/idem/internal/catalog"
	"github.com/idem-dev/idem/internal/job"
	"github.com/idem-dev/idem/internal/report"
	"github.com/idem-dev/idem/pipelines"
)

// changesChain is a chain of three jobs in one database: vc
// (versioned_changes, from change files), src (a model: vc's active rows)
// and down (merge_by_key v2 applying src's changes by entity_id, the
// highest source_version winning). down must always equal src.
type changesChain struct {
	dir           string
	db            *DB
	vc, src, down *job.Job
	batch         int
}

const changesDownJob = `
name = "down"
pipeline = "merge_by_key"
transform_version = 2
schema_version = 1

[input]
upstream = ["src"]

[input.columns]
entity_id = "VARCHAR"
source_version = "BIGINT"
value = "VARCHAR"

[target]
key = ["entity_id"]
order_by = "source_version"
`

func newChangesChain(t testing.TB) *changesChain {
	dir := t.TempDir()
	write := func(name, text string) string {
		path := filepath.Join(dir, name)
		require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
		require.NoError(t, os.WriteFile(path, []byte(text), 0o644))
		return path
	}
	load := func(name, text string) *job.Job {
		j, err := LoadJob(write(name, text), pipelines.FS)
		require.NoError(t, err)
		return j
	}
	write("models/src/v1.sql", "SELECT entity_id, source_version, value FROM {{upstream:vc}} WHERE status = 'active'\n")
	c := &changesChain{dir: dir}
	c.vc = load("vc.toml", "name = \"vc\"\npipeline = \"versioned_changes\"\ntransform_version = 1\nschema_version = 1\n[input]\nformat = \"jsonl\"\n")
	c.src = load("src.toml", "name = \"src\"\npipeline = \"select\"\ntransform_version = 1\n[input]\nupstream = [\"vc\"]\n[transform]\nsql = \"models/src\"\n[target]\nkey = [\"entity_id\"]\n")
	c.down = load("down.toml", changesDownJob)
	db, err := Open(context.Background(), filepath.Join(dir, "idem.duckdb"), OpenOptions{DuckDB: job.DuckDBSettings{Threads: testThreads()}})
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	c.db = db
	return c
}

// change is one versioned change: a delete when value is "".
type change struct {
	entity  string
	version int64
	value   string
}

// apply runs vc over one batch of changes, then src.
func (c *changesChain) apply(t testing.TB, changes []change) {
	c.batch++
	var b strings.Builder
	for i, ch := range changes {
		op, val := "upsert", any(ch.value)
		if ch.value == "" {
			op, val = "delete", nil
		}
		line, _ := json.Marshal(map[string]any{"change_id": fmt.Sprintf("c-%d-%d", c.batch, i), "entity_id": ch.entity,
			"source_version": ch.version, "operation": op, "value": val})
		b.Write(line)
		b.WriteByte('\n')
	}
	path := filepath.Join(c.dir, fmt.Sprintf("batch-%04d.jsonl", c.batch))
	require.NoError(t, os.WriteFile(path, []byte(b.String()), 0o644))
	_, err := c.db.Run(context.Background(), c.vc, RunOptions{Input: path})
	require.NoError(t, err)
	_, err = c.db.Run(context.Background(), c.src, RunOptions{})
	require.NoError(t, err)
}

func (c *changesChain) runDown(t testing.TB) *Result {
	res, err := c.db.Run(context.Background(), c.down, RunOptions{})
	require.NoError(t, err)
	return res
}

// rows returns a query's rows, each as its columns joined by "|".
func (c *changesChain) rows(t testing.TB, q string) []string {
	rows, err := c.db.sql.QueryContext(context.Background(), q)
	require.NoError(t, err)
	defer rows.Close()
	cols, err := rows.Columns()
	require.NoError(t, err)
	out := []string{}
	for rows.Next() {
		vals := make([]sql.NullString, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		require.NoError(t, rows.Scan(ptrs...))
		parts := make([]string, len(vals))
		for i, v := range vals {
			parts[i] = "NULL"
			if v.Valid {
				parts[i] = v.String
			}
		}
		out = append(out, strings.Join(parts, "|"))
	}
	require.NoError(t, rows.Err())
	return out
}

// checkMirror asserts that down holds exactly src's rows, all active, and
// that no key holds both a row and a tombstone.
func (c *changesChain) checkMirror(t testing.TB) {
	t.Helper()
	want := c.rows(t, `SELECT entity_id, source_version, value, 'active' FROM src ORDER BY entity_id`)
	got := c.rows(t, `SELECT entity_id, source_version, value, idem_status FROM down ORDER BY entity_id`)
	require.Equal(t, want, got, "down equals src recomputed from scratch")
	require.Empty(t, c.rows(t, `SELECT entity_id FROM down_tombstones JOIN down USING (entity_id)`), "a key holds a row and a tombstone")
}

// TestChangesSelect checks the relation an apply job reads from an
// upstream's history: between any two snapshots, the upserts are the rows
// of the later one that are not rows of the earlier one, and the deletes
// the rows of the earlier one whose key is gone.
func TestChangesSelect(t *testing.T) {
	t.Parallel()
	c := newChangesChain(t)
	batches := [][]change{
		{{"a", 1, "a1"}, {"b", 1, "b1"}, {"c", 1, "c1"}},
		{{"a", 2, "a2"}, {"b", 2, ""}},                 // update a, delete b
		{{"b", 3, "b3"}, {"c", 2, ""}, {"d", 1, "d1"}}, // b back, delete c, new d
		{{"d", 2, ""}, {"a", 3, "a3"}},                 // d gone again
	}
	for _, b := range batches {
		c.apply(t, b)
	}
	ctx := context.Background()
	row, err := catalog.ReadSnapshot(ctx, c.db.sql, "src", 4)
	require.NoError(t, err)
	pinned := func(s int64) map[string]string {
		out := map[string]string{}
		if s == 0 {
			return out
		}
		for _, r := range c.rows(t, mustPinned(t, c.db.sql, "src", row.Columns, s)) {
			out[strings.SplitN(r, "|", 2)[0]] = r
		}
		return out
	}
	// One range spelled out: a updated, b deleted and back, c deleted, d
	// new.
	require.Equal(t, []string{"a|2|a2|upsert", "b|3|b3|upsert", "c|1|c1|delete", "d|1|d1|upsert"},
		c.rows(t, mustChanges(t, c.db.sql, "src", row.Columns, []string{"entity_id"}, 1, 3)))
	for from := int64(0); from <= 4; from++ {
		for to := from; to <= 4; to++ {
			t.Run(fmt.Sprintf("%d-%d", from, to), func(t *testing.T) {
				before, after := pinned(from), pinned(to)
				want := []string{}
				for k, r := range after {
					if before[k] != r {
						want = append(want, r+"|upsert")
					}
				}
				for k, r := range before {
					if _, ok := after[k]; !ok {
						want = append(want, r+"|delete")
					}
				}
				slices.Sort(want)
				got := c.rows(t, mustChanges(t, c.db.sql, "src", row.Columns, []string{"entity_id"}, from, to))
				require.Equal(t, want, got)
			})
		}
	}
}

// TestUpstreamApply runs merge_by_key v2 over an upstream's changes: each
// run applies the range since the snapshot it pinned as one batch named
// from it, deletes leave tombstones, nothing moved skips, and down always
// equals src.
func TestUpstreamApply(t *testing.T) {
	t.Parallel()
	c := newChangesChain(t)
	c.apply(t, []change{{"a", 1, "a1"}, {"b", 1, "b1"}, {"c", 1, "c1"}})
	res := c.runDown(t)
	require.Equal(t, report.DecisionApplied, res.Decision)
	require.Equal(t, "upstream:src:0-1", res.BatchID)
	require.Equal(t, int64(3), res.RowsIn)
	require.Equal(t, map[string]int64{"accepted": 3}, res.Outcomes)
	c.checkMirror(t)

	// Nothing moved: skipped, nothing written.
	res = c.runDown(t)
	require.Equal(t, report.DecisionSkipped, res.Decision)
	require.Equal(t, int64(1), res.Snapshot)

	// Two upstream snapshots in one range: a updated twice, b deleted, c
	// deleted and back, d new.
	c.apply(t, []change{{"a", 2, "a2"}, {"b", 2, ""}, {"c", 2, ""}})
	c.apply(t, []change{{"a", 3, "a3"}, {"c", 3, "c3"}, {"d", 1, "d1"}})
	res = c.runDown(t)
	require.Equal(t, "upstream:src:1-3", res.BatchID)
	require.Equal(t, map[string]int64{"accepted": 4}, res.Outcomes) // a, b (delete), c, d
	require.Equal(t, []string{"b|1"}, c.rows(t, `SELECT entity_id, idem_order FROM down_tombstones ORDER BY ALL`))
	require.Equal(t, []string{"a|a3|upsert|accepted", "b|b1|delete|accepted", "c|c3|upsert|accepted", "d|d1|upsert|accepted"},
		c.rows(t, `SELECT entity_id, value, idem_op, outcome FROM down_outcomes WHERE batch_id = 'upstream:src:1-3' ORDER BY entity_id`))
	c.checkMirror(t)

	// b comes back above its tombstone, which goes.
	c.apply(t, []change{{"b", 5, "b5"}})
	res = c.runDown(t)
	require.Equal(t, "upstream:src:3-4", res.BatchID)
	require.Empty(t, c.rows(t, `SELECT * FROM down_tombstones`))
	c.checkMirror(t)

	// The ledger names each range once, with the snapshots it pinned.
	require.Equal(t, []string{"upstream:src:0-1|1", "upstream:src:1-3|2", "upstream:src:3-4|3"},
		c.rows(t, `SELECT batch_id, snapshot FROM idem.ledger WHERE job = 'down' ORDER BY snapshot`))
}

// TestUpstreamApplyProperty applies random change batches (new entities,
// updates, deletes, conflicts, stale replays) to vc, rebuilds src, and runs
// down after a random number of them, so that one range often spans
// several upstream snapshots. After every run of down its target equals
// src's rows recomputed from scratch, and the rows it read equal a Go diff
// of src between the two runs. IDEM_LONG=1 runs more seeds and batches
// (docs/reliability.md).
func TestUpstreamApplyProperty(t *testing.T) {
	t.Parallel()
	seeds, batches, entities := 1, 10, 8
	if os.Getenv("IDEM_LONG") == "1" {
		seeds, batches, entities = 4, 80, 40
	}
	for seed := range seeds {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(seed), 15))
			c := newChangesChain(t)
			version := int64(0)
			seen := map[string]string{} // src's rows at down's last run
			for b := range batches {
				var changes []change
				for range 1 + rng.IntN(6) {
					e := fmt.Sprintf("e%02d", rng.IntN(entities))
					version++
					switch r := rng.IntN(10); {
					case r < 6:
						changes = append(changes, change{e, version, fmt.Sprintf("v%d", rng.IntN(3))})
					case r < 8:
						changes = append(changes, change{e, version, ""})
					case r < 9: // distinct payloads at one version: a conflict
						changes = append(changes, change{e, version, "x"}, change{e, version, "y"})
					default: // a stale replay
						changes = append(changes, change{e, 1 + rng.Int64N(version), "old"})
					}
				}
				c.apply(t, changes)
				if rng.IntN(3) > 0 && b < batches-1 {
					continue
				}
				now := map[string]string{}
				for _, r := range c.rows(t, `SELECT entity_id, source_version, value FROM src`) {
					now[strings.SplitN(r, "|", 2)[0]] = r
				}
				diff := 0
				for k, r := range now {
					if seen[k] != r {
						diff++
					}
				}
				for k := range seen {
					if _, ok := now[k]; !ok {
						diff++
					}
				}
				res := c.runDown(t)
				if res.Decision == report.DecisionSkipped {
					require.Zero(t, diff)
				} else {
					require.Equal(t, int64(diff), res.RowsIn, "batch %s reads the changed rows", res.BatchID)
					require.Equal(t, res.RowsIn, res.Outcomes["accepted"], "every change is accepted: %v", res.Outcomes)
				}
				c.checkMirror(t)
				seen = now
			}
		})
	}
}

// TestUpstreamApplyTombstones walks merge_by_key v2's rules for an
// upstream whose ordering value can go down (raw, without order_by, keeps
// the later batch; its model drops rows whose value is "gone", which
// reaches down as a delete carrying the row's last values).
func TestUpstreamApplyTombstones(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ctx := context.Background()
	load := func(name, text string) *job.Job {
		path := filepath.Join(dir, name)
		require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
		require.NoError(t, os.WriteFile(path, []byte(text), 0o644))
		j, err := LoadJob(path, pipelines.FS)
		require.NoError(t, err)
		return j
	}
	cols := "[input.columns]\nk = \"VARCHAR\"\no = \"BIGINT\"\nv = \"VARCHAR\"\n[target]\nkey = [\"k\"]\n"
	raw := load("raw.toml", "name = \"raw\"\npipeline = \"merge_by_key\"\ntransform_version = 1\nschema_version = 1\n[input]\nformat = \"jsonl\"\n"+cols)
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "models", "live"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "models", "live", "v1.sql"), []byte("SELECT k, o, v FROM {{upstream:raw}} WHERE v <> 'gone'\n"), 0o644))
	live := load("live.toml", "name = \"live\"\npipeline = \"select\"\ntransform_version = 1\n[input]\nupstream = [\"raw\"]\n[transform]\nsql = \"models/live\"\n[target]\nkey = [\"k\"]\n")
	down := load("down.toml", "name = \"down\"\npipeline = \"merge_by_key\"\ntransform_version = 2\nschema_version = 1\n[input]\nupstream = [\"live\"]\n"+cols+"order_by = \"o\"\n")
	db := openTestDB(t, dir)
	for i, step := range []struct {
		o                 int64
		v                 string
		op, outcome, rows string // rows: down's row and tombstone after the step
	}{
		{5, "a", "upsert", "accepted", "k|5|a row"},
		{3, "b", "upsert", "stale", "k|5|a row"},            // lower: stale
		{3, "gone", "delete", "stale", "k|5|a row"},         // a delete below the row: stale
		{6, "c", "upsert", "accepted", "k|6|c row"},         //
		{6, "gone", "delete", "accepted", "k|6 tombstone"},  // a delete at the row's value: removed, tombstone
		{4, "d", "upsert", "stale", "k|6 tombstone"},        // below the tombstone: never resurrected
		{6, "e", "upsert", "stale", "k|6 tombstone"},        // at the tombstone: stale too
		{6, "gone", "delete", "duplicate", "k|6 tombstone"}, // a delete at the tombstone
		{8, "f", "upsert", "accepted", "k|8|f row"},         // above it: back, tombstone cleared
	} {
		file := filepath.Join(dir, fmt.Sprintf("b%d.jsonl", i))
		require.NoError(t, os.WriteFile(file, []byte(fmt.Sprintf(`{"k":"k","o":%d,"v":%q}`+"\n", step.o, step.v)), 0o644))
		_, err := db.Run(ctx, raw, RunOptions{Input: file})
		require.NoError(t, err)
		_, err = db.Run(ctx, live, RunOptions{})
		require.NoError(t, err)
		res, err := db.Run(ctx, down, RunOptions{})
		require.NoError(t, err, "step %d", i)
		require.Equal(t, map[string]int64{step.outcome: 1}, res.Outcomes, "step %d", i)
		var op string
		require.NoError(t, db.sql.QueryRowContext(ctx, `SELECT idem_op FROM down_outcomes WHERE batch_id = ?`, res.BatchID).Scan(&op))
		require.Equal(t, step.op, op, "step %d", i)
		got := append(queryStrings(t, db.sql, `SELECT k || '|' || o || '|' || v || ' row' FROM down`),
			queryStrings(t, db.sql, `SELECT k || '|' || idem_order || ' tombstone' FROM down_tombstones`)...)
		require.Equal(t, []string{step.rows}, got, "step %d", i)
	}
}

// mustPinned is catalog.PinnedSelect in a test.
func mustPinned(t testing.TB, q catalog.Querier, j string, cols []catalog.TargetColumn, snapshot int64) string {
	t.Helper()
	s, err := catalog.PinnedSelect(context.Background(), q, j, cols, snapshot)
	require.NoError(t, err)
	return s
}

// mustChanges is catalog.ChangesSelect in a test.
func mustChanges(t testing.TB, q catalog.Querier, j string, cols []catalog.TargetColumn, key []string, from, to int64) string {
	t.Helper()
	s, err := catalog.ChangesSelect(context.Background(), q, j, cols, key, from, to)
	require.NoError(t, err)
	return s
}
