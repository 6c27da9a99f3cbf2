package history_test

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
	"github.com/idem-dev/idem/internal/history"
	"github.com/idem-dev/idem/internal/job"
	"github.com/idem-dev/idem/internal/report"
	"github.com/idem-dev/idem/internal/run"
	"github.com/idem-dev/idem/internal/sqltext"
	"github.com/idem-dev/idem/pipelines"
)

// histChain is three jobs in one database: vc (versioned_changes: appended
// history whose target never loses a key but by rollback or erasure), src
// (a model of vc's active rows: a refresh, closed history) and down
// (merge_by_key v2 applying src's changes: appended history with markers
// for deleted keys). captured holds each job's target as committed at each
// snapshot, rows as strings, key first.
type histChain struct {
	dir      string
	db       *run.DB
	jobs     map[string]*job.Job
	batch    int
	captured map[string]map[int64][]string
}

func newHistChain(t *testing.T) *histChain {
	dir := t.TempDir()
	write := func(name, text string) string {
		path := filepath.Join(dir, name)
		require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
		require.NoError(t, os.WriteFile(path, []byte(text), 0o644))
		return path
	}
	load := func(name, text string) *job.Job {
		j, err := run.LoadJob(write(name, text), pipelines.FS)
		require.NoError(t, err)
		return j
	}
	write("models/src/v1.sql", "SELECT entity_id, source_version, value FROM {{upstream:vc}} WHERE status = 'active'\n")
	c := &histChain{dir: dir, jobs: map[string]*job.Job{}, captured: map[string]map[int64][]string{}}
	c.jobs["vc"] = load("vc.toml", "name = \"vc\"\npipeline = \"versioned_changes\"\ntransform_version = 1\nschema_version = 1\n[input]\nformat = \"jsonl\"\n")
	c.jobs["src"] = load("src.toml", "name = \"src\"\npipeline = \"select\"\ntransform_version = 1\n[input]\nupstream = [\"vc\"]\n[transform]\nsql = \"models/src\"\n[target]\nkey = [\"entity_id\"]\n")
	c.jobs["down"] = load("down.toml", `name = "down"
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
`)
	db, err := run.Open(context.Background(), filepath.Join(dir, "idem.duckdb"), run.OpenOptions{DuckDB: job.DuckDBSettings{Threads: histThreads()}})
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	c.db = db
	return c
}

// rows returns a query's rows, each as its columns joined by "|".
func (c *histChain) rows(t *testing.T, q string) []string {
	t.Helper()
	rows, err := c.db.SQL().QueryContext(context.Background(), q)
	require.NoError(t, err, q)
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
	slices.Sort(out)
	return out
}

// capture records job name's target as its snapshot s.
func (c *histChain) capture(t *testing.T, name string, s int64) {
	if c.captured[name] == nil {
		c.captured[name] = map[int64][]string{}
	}
	c.captured[name][s] = c.rows(t, "SELECT * FROM "+sqltext.QuoteIdent(c.jobs[name].Table))
}

func (c *histChain) run(t *testing.T, name string, opts run.RunOptions) {
	res, err := c.db.Run(context.Background(), c.jobs[name], opts)
	require.NoError(t, err, name)
	if res.Decision != report.DecisionSkipped {
		c.capture(t, name, res.Snapshot)
	}
}

// apply runs vc over one batch of changes (a delete when value is ""),
// then src and down.
func (c *histChain) apply(t *testing.T, changes []change) {
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
	c.run(t, "vc", run.RunOptions{Input: path})
	c.run(t, "src", run.RunOptions{})
	c.run(t, "down", run.RunOptions{})
}

type change struct {
	entity  string
	version int64
	value   string
}

// closeHistory closes job name's appended rows in bulk (the format every
// history had before appended rows), as a checkpoint may.
func (c *histChain) closeHistory(t *testing.T, name string) {
	ctx := context.Background()
	tx, err := c.db.SQL().BeginTx(ctx, nil)
	require.NoError(t, err)
	require.NoError(t, catalog.CloseHistory(ctx, tx, name))
	require.NoError(t, tx.Commit())
}

// check asserts, for each job, that a pinned read of every snapshot is the
// target captured right after it committed, and that ChangesSelect between
// every two snapshots is the difference of their captures by key: the
// rows of b whose key's row changed after a, and the rows of a whose key is
// gone at b; and that ChangedValuesSelect names the values of the rows
// that differ between the two captures. Snapshots of a job are numbered
// 1, 2, ... and all captured.
func (c *histChain) check(t *testing.T, step string, oldestKept int64) {
	ctx := context.Background()
	for name, caps := range c.captured {
		var snaps []int64
		for s := range caps {
			snaps = append(snaps, s)
		}
		slices.Sort(snaps)
		last := snaps[len(snaps)-1]
		row, err := catalog.ReadSnapshot(ctx, c.db.SQL(), name, last)
		require.NoError(t, err)
		byKey := func(s int64) map[string]string {
			out := map[string]string{}
			for _, r := range caps[s] {
				out[strings.SplitN(r, "|", 2)[0]] = r
			}
			return out
		}
		for _, s := range snaps {
			if s < oldestKept {
				continue
			}
			q, err := catalog.PinnedSelect(ctx, c.db.SQL(), name, row.Columns, s)
			require.NoError(t, err)
			require.Equal(t, caps[s], c.rows(t, q), "%s: %s: pinned read of snapshot %d", step, name, s)
		}
		for _, a := range append([]int64{0}, snaps...) {
			for _, b := range snaps {
				if b < a || a < oldestKept {
					continue
				}
				before, after := byKey(a), byKey(b)
				// A key's row began after a when it changed at some
				// snapshot in (a, b], even back to what it was at a (a
				// rollback's rows are new ones).
				began := map[string]bool{}
				for s := a + 1; s <= b; s++ {
					prev, cur := byKey(s-1), byKey(s)
					for k := range cur {
						began[k] = began[k] || prev[k] != cur[k]
					}
					for k := range prev {
						began[k] = began[k] || prev[k] != cur[k]
					}
				}
				// By key: the rows of b that began after a, and the rows
				// of a whose key is gone at b. Without a key: the rows of
				// b that began after a, and the rows of a that ended.
				want, wantAll := []string{}, []string{}
				for k, r := range after {
					if began[k] {
						want = append(want, r+"|upsert")
						wantAll = append(wantAll, r+"|upsert")
					}
				}
				for k, r := range before {
					if _, ok := after[k]; !ok {
						want = append(want, r+"|delete")
					}
					if began[k] {
						wantAll = append(wantAll, r+"|delete")
					}
				}
				slices.Sort(want)
				slices.Sort(wantAll)
				q, err := catalog.ChangesSelect(ctx, c.db.SQL(), name, row.Columns, []string{"entity_id"}, a, b)
				require.NoError(t, err)
				require.Equal(t, want, c.rows(t, q), "%s: %s: changes %d-%d by key", step, name, a, b)
				q, err = catalog.ChangesSelect(ctx, c.db.SQL(), name, row.Columns, nil, a, b)
				require.NoError(t, err)
				require.Equal(t, wantAll, c.rows(t, q), "%s: %s: changes %d-%d without a key", step, name, a, b)
				// The changed values of a column, of the key and of both:
				// those of the rows whose count differs between a and b.
				// The default run checks one of the three per pair, in
				// turn (every one over the pairs); IDEM_LONG=1 all three.
				sels := [][]string{{"value"}, {"entity_id"}, {"value", "entity_id"}}
				if os.Getenv("IDEM_LONG") != "1" {
					sels = sels[(a+b)%3 : (a+b)%3+1]
				}
				for _, sel := range sels {
					q, err := catalog.ChangedValuesSelect(ctx, c.db.SQL(), name, row.Columns, sel, a, b)
					require.NoError(t, err)
					require.Equal(t, changedValues(caps[a], caps[b], row.Columns, sel), c.rows(t, q), "%s: %s: changed values of %v %d-%d", step, name, sel, a, b)
				}
			}
		}
	}
}

// changedValues is the distinct values of columns sel (joined by "|",
// sorted) over the rows whose count in before differs from their count
// in after (rows as histChain.rows reads them, of columns cols).
func changedValues(before, after []string, cols []catalog.TargetColumn, sel []string) []string {
	count := map[string]int{}
	for _, r := range before {
		count[r]--
	}
	for _, r := range after {
		count[r]++
	}
	seen := map[string]bool{}
	out := []string{}
	for r, n := range count {
		if n == 0 {
			continue
		}
		parts := strings.Split(r, "|")
		vals := make([]string, len(sel))
		for i, s := range sel {
			for k, c := range cols {
				if c.Name == s {
					vals[i] = parts[k]
				}
			}
		}
		v := strings.Join(vals, "|")
		if !seen[v] {
			seen[v] = true
			out = append(out, v)
		}
	}
	slices.Sort(out)
	return out
}

// histThreads is the DuckDB threads of the property's databases: one by
// default, two with IDEM_LONG=1 (the long runs also see parallel plans).
func histThreads() int {
	if os.Getenv("IDEM_LONG") == "1" {
		return 2
	}
	return 1
}

// TestHistoryProperty runs random sequences of batches (inserts, updates,
// deletes, re-inserts of deleted keys), erasures, rollbacks and bulk closes
// of the appended rows over a chain of jobs, and checks that every snapshot's pinned read is the target as committed then, and
// every range's changes the difference of the two. Closing in bulk at
// random points mixes closed rows (a history from before appended rows)
// with appended ones. Last, catalog.ExpireHistory drops the snapshots
// before a random one and the later ones must read the same. The default
// run is one sequence checked at its end; IDEM_LONG=1 runs 200, checked
// after every step (docs/reliability.md).
func TestHistoryProperty(t *testing.T) {
	t.Parallel()
	long := os.Getenv("IDEM_LONG") == "1"
	seeds := 1
	if long {
		seeds = 200
	}
	for seed := 0; seed < seeds; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			t.Parallel()
			rng := rand.New(rand.NewPCG(uint64(seed), 16))
			c := newHistChain(t)
			ctx := context.Background()
			entities := []string{"a", "b", "c", "d", "e"}
			version := map[string]int64{}
			for step := 0; step < 10; step++ {
				label := fmt.Sprintf("seed %d step %d", seed, step)
				switch r := rng.IntN(10); {
				case r < 6 || step == 0:
					var changes []change
					for range 1 + rng.IntN(4) {
						e := entities[rng.IntN(len(entities))]
						version[e] += 1 + int64(rng.IntN(2))
						v := fmt.Sprintf("%s%d", e, version[e])
						if rng.IntN(3) == 0 {
							v = "" // a delete; a later upsert re-inserts
						}
						changes = append(changes, change{e, version[e], v})
					}
					c.apply(t, changes)
				case r < 7:
					e := entities[rng.IntN(len(entities))]
					res, err := history.Erase(ctx, c.db, c.jobs["vc"], history.EraseOptions{Key: e})
					if err != nil {
						continue // a key found nowhere
					}
					for s, rows := range c.captured["vc"] {
						c.captured["vc"][s] = slices.DeleteFunc(slices.Clone(rows), func(r string) bool { return strings.HasPrefix(r, e+"|") })
					}
					if !res.AlreadyErased {
						c.capture(t, "vc", res.Snapshot)
					}
				case r < 9:
					name := []string{"vc", "down"}[rng.IntN(2)]
					st, err := catalog.ReadState(ctx, c.db.SQL(), name)
					require.NoError(t, err)
					if st.Snapshot < 2 {
						continue
					}
					res, err := history.Rollback(ctx, c.db, c.jobs[name], 1+rng.Int64N(st.Snapshot-1), history.RollbackOptions{})
					if err != nil {
						require.Equal(t, 3, report.ExitCode(err), "%s: rollback: %v", label, err)
						continue // over an erasure
					}
					c.capture(t, name, res.Snapshot)
				default:
					c.closeHistory(t, []string{"vc", "down"}[rng.IntN(2)])
				}
				if long {
					c.check(t, label, 0)
				}
			}
			c.check(t, fmt.Sprintf("seed %d", seed), 0)
			// Expiring the snapshots before k leaves every later one's
			// pinned reads and changes as they were, and frees rows.
			k := int64(1 + rng.IntN(8))
			for name := range c.captured {
				var before, after int64
				count := "SELECT count(*) FROM " + catalog.HistoryTable(name)
				require.NoError(t, c.db.SQL().QueryRowContext(ctx, count).Scan(&before))
				tx, err := c.db.SQL().BeginTx(ctx, nil)
				require.NoError(t, err)
				require.NoError(t, catalog.ExpireHistory(ctx, tx, name, k))
				require.NoError(t, tx.Commit())
				require.NoError(t, c.db.SQL().QueryRowContext(ctx, count).Scan(&after))
				require.LessOrEqual(t, after, before)
				t.Logf("%s: expire before %d: %d history rows -> %d", name, k, before, after)
			}
			c.check(t, fmt.Sprintf("seed %d, expired before %d", seed, k), k)
		})
	}
}
