package run

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idem-dev/idem/internal/catalog"
	"github.com/idem-dev/idem/internal/job"
	"github.com/idem-dev/idem/internal/report"
	"github.com/idem-dev/idem/pipelines"
)

// incrementalModels are the models of TestIncrementalProperty, each run
// twice: incremental (by partition part, or by key) and rebuilt whole. src is vc's
// active rows with a partition (value's first letter), counts the rows of
// each partition: the incremental models read both.
var incrementalModels = []struct{ name, key, sql string }{
	{"agg", `["part"]`, "SELECT part, count(*) AS n, sum(source_version) AS s, sum(CAST(source_version AS DOUBLE) / 7) AS d,\n" +
		"  string_agg(entity_id, ',' ORDER BY entity_id) AS ids, min(value) AS lo\nFROM {{upstream:src}} GROUP BY part"},
	{"win", `["part", "entity_id"]`, "SELECT part, entity_id, value, row_number() OVER (PARTITION BY part ORDER BY entity_id) AS rn,\n" +
		"  lag(value) OVER (PARTITION BY part ORDER BY entity_id) AS prev,\n" +
		"  sum(CAST(source_version AS DOUBLE) / 3) OVER (PARTITION BY part ORDER BY entity_id) AS run\nFROM {{upstream:src}} WHERE value NOT LIKE '%9'"},
	{"joined", `["part", "entity_id"]`, "WITH s AS (SELECT * FROM {{upstream:src}} WHERE source_version % 5 <> 0)\n" +
		"SELECT s.part, s.entity_id, s.value, c.n, c.n * 2 AS twice\nFROM s LEFT JOIN {{upstream:counts}} AS c ON s.part = c.part AND c.n > 1"},
	// per_part reads win, an incremental model, whose history is kept by
	// key: its changes are read the way that follows what changed.
	{"per_part", `["part"]`, "SELECT part, count(*) AS n, max(rn) AS top, string_agg(value, '' ORDER BY entity_id) AS vals FROM {{upstream:win}} GROUP BY part"},
	// by_value reads vc, keyed by entity_id, partitioned by its value:
	// an update moves an entity between partitions, a delete leaves a
	// row without one (a tombstone, value NULL).
	{"by_value", `["value"]`, "SELECT value, count(*) AS n, string_agg(entity_id, ',' ORDER BY entity_id) AS ids FROM {{upstream:vc}} WHERE status = 'active' GROUP BY value"},
	// By key (incremental = "key"): by_pair's key of two columns is not
	// its upstream's (an update moves an entity between keys);
	// by_entity joins src to win, an incremental model, on its key.
	{"by_pair", `["part", "value"]`, "SELECT part, value, count(*) AS n, sum(CAST(source_version AS DOUBLE) / 7) AS d,\n" +
		"  string_agg(entity_id, ',' ORDER BY entity_id) AS ids FROM {{upstream:src}} GROUP BY part, value"},
	{"by_entity", `["entity_id"]`, "SELECT s.entity_id, s.value, w.rn, w.prev, row_number() OVER (PARTITION BY s.entity_id ORDER BY w.rn) AS one\n" +
		"FROM {{upstream:src}} AS s LEFT JOIN {{upstream:win}} AS w ON w.entity_id = s.entity_id WHERE s.source_version % 4 <> 1"},
}

// incrementalSetup is a database with vc (versioned changes), src and
// counts (models over vc) and each of incrementalModels twice.
type incrementalSetup struct {
	db         *DB
	dir        string
	vc, src    *job.Job
	counts     *job.Job
	incr, full []*job.Job
	batch      int
}

func newIncrementalSetup(t *testing.T) *incrementalSetup {
	dir := t.TempDir()
	write := func(name, text string) string {
		path := filepath.Join(dir, name)
		require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
		require.NoError(t, os.WriteFile(path, []byte(text), 0o644))
		return path
	}
	load := func(name, text string) *job.Job {
		j, err := LoadJob(write(name+".toml", text), pipelines.FS)
		require.NoError(t, err)
		return j
	}
	// A model's upstreams are what its SQL reads (upstream names the jobs it
	// is expected to read; a declared upstream must be read).
	model := func(name string, upstream []string, key, sql, target string) *job.Job {
		write("models/"+name+".sql", sql+"\n")
		j := load(name, fmt.Sprintf("name = %q\npipeline = \"select\"\n[transform]\nsql = \"models/%s.sql\"\n[target]\nkey = %s\n%s",
			name, name, key, target))
		for _, u := range upstream {
			if strings.Contains(sql, "{{upstream:"+u+"}}") {
				require.Contains(t, j.Input.Upstream, u, name)
			}
		}
		return j
	}
	s := &incrementalSetup{dir: dir}
	s.vc = load("vc", "name = \"vc\"\npipeline = \"versioned_changes\"\ntransform_version = 1\nschema_version = 1\n[input]\nformat = \"jsonl\"\n")
	s.src = model("src", []string{"vc"}, `["entity_id"]`, "SELECT entity_id, source_version, value, substr(value, 1, 1) AS part FROM {{upstream:vc}} WHERE status = 'active'", "")
	s.counts = model("counts", []string{"vc"}, `["part"]`, "SELECT substr(value, 1, 1) AS part, count(*) AS n FROM {{upstream:vc}} WHERE status = 'active' GROUP BY 1", "")
	for _, m := range incrementalModels {
		up := []string{"src", "counts"}
		target := "partition_by = \"part\"\nincremental = \"partition\"\n"
		switch m.name {
		case "per_part":
			up = []string{"win"}
		case "by_value":
			up, target = []string{"vc"}, "partition_by = \"value\"\nincremental = \"partition\"\n"
		case "by_pair":
			up, target = []string{"src"}, "incremental = \"key\"\n"
		case "by_entity":
			up, target = []string{"src", "win"}, "incremental = \"key\"\n"
		}
		s.incr = append(s.incr, model(m.name, up, m.key, m.sql, target))
		s.full = append(s.full, model(m.name+"_full", up, m.key, m.sql, ""))
	}
	db, err := Open(context.Background(), filepath.Join(dir, "idem.duckdb"), OpenOptions{DuckDB: job.DuckDBSettings{Threads: testThreads()}})
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	s.db = db
	return s
}

// apply runs vc over one batch of changes (value "" deletes), then src,
// counts and every model; it returns the incremental models' results.
func (s *incrementalSetup) apply(t *testing.T, changes []change) []*Result {
	ctx := context.Background()
	s.batch++
	var b strings.Builder
	for i, ch := range changes {
		op, val := "upsert", "\""+ch.value+"\""
		if ch.value == "" {
			op, val = "delete", "null"
		}
		fmt.Fprintf(&b, `{"change_id":"c-%d-%d","entity_id":%q,"source_version":%d,"operation":%q,"value":%s}`+"\n", s.batch, i, ch.entity, ch.version, op, val)
	}
	path := filepath.Join(s.dir, fmt.Sprintf("batch-%04d.jsonl", s.batch))
	require.NoError(t, os.WriteFile(path, []byte(b.String()), 0o644))
	_, err := s.db.Run(ctx, s.vc, RunOptions{Input: path})
	require.NoError(t, err)
	for _, j := range []*job.Job{s.src, s.counts} {
		_, err := s.db.Run(ctx, j, RunOptions{})
		require.NoError(t, err)
	}
	var out []*Result
	for i := range s.incr {
		res, err := s.db.Run(ctx, s.incr[i], RunOptions{})
		require.NoError(t, err, "batch %d: %s", s.batch, s.incr[i].Name)
		out = append(out, res)
		_, err = s.db.Run(ctx, s.full[i], RunOptions{})
		require.NoError(t, err)
	}
	return out
}

// same requires each incremental model's rows to equal its full twin's,
// now and, through history, at every snapshot up to now.
func (s *incrementalSetup) same(t *testing.T, everySnapshot bool) {
	ctx := context.Background()
	for i, inc := range s.incr {
		full := s.full[i]
		order := strings.Join(inc.Key, ", ")
		require.Equal(t, s.text(t, "SELECT * FROM "+full.Table+" ORDER BY "+order), s.text(t, "SELECT * FROM "+inc.Table+" ORDER BY "+order),
			"batch %d: %s", s.batch, inc.Name)
		if !everySnapshot {
			continue
		}
		st, err := catalog.ReadState(ctx, s.db.sql, inc.Name)
		require.NoError(t, err)
		fst, err := catalog.ReadState(ctx, s.db.sql, full.Name)
		require.NoError(t, err)
		require.Equal(t, fst.Snapshot, st.Snapshot, "%s: both commit on the same runs", inc.Name)
		cols, err := catalog.TargetColumns(ctx, s.db.sql, inc.Table)
		require.NoError(t, err)
		for snap := int64(1); snap <= st.Snapshot; snap++ {
			a, err := catalog.PinnedSelect(ctx, s.db.sql, inc.Name, cols, snap)
			require.NoError(t, err)
			b, err := catalog.PinnedSelect(ctx, s.db.sql, full.Name, cols, snap)
			require.NoError(t, err)
			require.Equal(t, s.text(t, "SELECT * FROM ("+b+") ORDER BY "+order), s.text(t, "SELECT * FROM ("+a+") ORDER BY "+order),
				"%s at snapshot %d", inc.Name, snap)
		}
	}
}

// text is a query's rows, one line each, columns joined by "|".
func (s *incrementalSetup) text(t *testing.T, q string) string {
	rows, err := s.db.sql.QueryContext(context.Background(), "SELECT CAST(COLUMNS(*) AS VARCHAR) FROM ("+q+")")
	require.NoError(t, err)
	defer rows.Close()
	cols, err := rows.Columns()
	require.NoError(t, err)
	var b strings.Builder
	for rows.Next() {
		vals := make([]*string, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		require.NoError(t, rows.Scan(ptrs...))
		for i, v := range vals {
			if i > 0 {
				b.WriteByte('|')
			}
			if v == nil {
				b.WriteString("NULL")
			} else {
				b.WriteString(*v)
			}
		}
		b.WriteByte('\n')
	}
	require.NoError(t, rows.Err())
	return b.String()
}

// TestIncrementalProperty: random batches of upstream changes (inserts,
// updates that stay in or move between partitions or keys, deletes) leave
// every incremental model, by partition or by key, holding the rows of the
// same model rebuilt whole, after every batch and at every snapshot of its
// history; every run after the first recomputes only the partitions (keys)
// that changed.
// IDEM_LONG=1 runs more seeds and batches (about 15 minutes on 2 shared
// cores: go test -timeout 30m).
func TestIncrementalProperty(t *testing.T) {
	t.Parallel()
	seeds, batches := 1, 4
	if os.Getenv("IDEM_LONG") == "1" {
		seeds, batches = 6, 40
	}
	for seed := range seeds {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			t.Parallel()
			rng := rand.New(rand.NewPCG(uint64(seed), 31))
			s := newIncrementalSetup(t)
			version := map[string]int64{}
			letters := "abcdef"
			recomputed := map[string]int{}
			for b := range batches {
				var changes []change
				for range 1 + rng.IntN(12) {
					e := fmt.Sprintf("e%02d", rng.IntN(30))
					version[e] += 1 + int64(rng.IntN(3))
					v := fmt.Sprintf("%c%d", letters[rng.IntN(len(letters))], rng.IntN(10))
					if b > 0 && rng.IntN(4) == 0 {
						v = "" // a delete
					}
					changes = append(changes, change{entity: e, version: version[e], value: v})
				}
				results := s.apply(t, changes)
				for i, res := range results {
					note := res.IncrementalNote
					switch {
					case b == 0:
						require.Equal(t, "full", res.Incremental, "first load")
					case res.Decision == report.DecisionLoaded && (strings.HasPrefix(note, "every partition changed") || strings.HasPrefix(note, "as many keys changed")):
						require.Equal(t, "full", res.Incremental)
					case res.Decision == report.DecisionLoaded:
						mode := s.incr[i].Incremental
						require.Equal(t, mode, res.Incremental, "batch %d %s: %s", b, s.incr[i].Name, note)
						if len(res.Partitions) == 0 && res.Keys == 0 {
							// The upstream moved, but none of its rows
							// differ (a row rewritten as it was).
							require.Zero(t, res.RowsWritten, "batch %d %s", b, s.incr[i].Name)
						}
						recomputed[mode]++
					}
				}
				s.same(t, b == batches-1)
			}
			require.Positive(t, recomputed[job.IncrementalPartition], "some runs recomputed only their partitions")
			require.Positive(t, recomputed[job.IncrementalKey], "some runs recomputed only their keys")
		})
	}
}
