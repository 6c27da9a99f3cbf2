package history_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idem-dev/idem/internal/history"
	"github.com/idem-dev/idem/internal/job"
	"github.com/idem-dev/idem/internal/run"
	"github.com/idem-dev/idem/internal/sqltext"
	"github.com/idem-dev/idem/pipelines"
)

// TestIncrementalAfterUpstreamRollback: incremental models (by partition,
// partitioned by a column that moves between rows, and by key) over an
// upstream rolled back to a snapshot at or above the one they last read
// recompute only what changed, from the upstream's history across the
// rollback, and hold the rows of the same models rebuilt whole; after a
// rollback below it they rebuild whole and still do.
func TestIncrementalAfterUpstreamRollback(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	write := func(name, text string) string {
		path := filepath.Join(dir, name)
		require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
		require.NoError(t, os.WriteFile(path, []byte(text), 0o644))
		return path
	}
	load := func(name, text string) *job.Job {
		j, err := run.LoadJob(write(name+".toml", text), pipelines.FS)
		require.NoError(t, err)
		return j
	}
	vc := load("vc", "name = \"vc\"\npipeline = \"versioned_changes\"\ntransform_version = 1\nschema_version = 1\n[input]\nformat = \"jsonl\"\n")
	models := []struct{ name, key, target, sql string }{
		{"by_value", `["value"]`, "partition_by = \"value\"\nincremental = \"partition\"\n",
			"SELECT value, count(*) AS n, string_agg(entity_id, ',' ORDER BY entity_id) AS ids FROM {{upstream:vc}} WHERE status = 'active' GROUP BY value"},
		{"by_entity", `["entity_id"]`, "incremental = \"key\"\n",
			"SELECT entity_id, value, source_version * 2 AS v2 FROM {{upstream:vc}} WHERE status = 'active'"},
	}
	var incr, full []*job.Job
	for _, m := range models {
		write("models/"+m.name+".sql", m.sql+"\n")
		for _, twin := range []struct{ suffix, target string }{{"", m.target}, {"_full", ""}} {
			j := load(m.name+twin.suffix, fmt.Sprintf("name = %q\npipeline = \"select\"\n[input]\nupstream = [\"vc\"]\n[transform]\nsql = \"models/%s.sql\"\n[target]\nkey = %s\n%s",
				m.name+twin.suffix, m.name, m.key, twin.target))
			if twin.suffix == "" {
				incr = append(incr, j)
			} else {
				full = append(full, j)
			}
		}
	}
	db, err := run.Open(ctx, filepath.Join(dir, "idem.duckdb"), run.OpenOptions{DuckDB: job.DuckDBSettings{Threads: 1}})
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })

	batch := 0
	apply := func(lines ...string) {
		batch++
		var b strings.Builder
		for i, l := range lines {
			// entity version value ("" deletes)
			f := strings.Fields(l + " ")
			op, val := "upsert", any(nil)
			if len(f) == 3 {
				val = f[2]
			} else {
				op = "delete"
			}
			line, _ := json.Marshal(map[string]any{"change_id": fmt.Sprintf("c-%d-%d", batch, i), "entity_id": f[0], "source_version": json.Number(f[1]), "operation": op, "value": val})
			b.Write(line)
			b.WriteByte('\n')
		}
		_, err := db.Run(ctx, vc, run.RunOptions{Input: write(fmt.Sprintf("batch-%d.jsonl", batch), b.String())})
		require.NoError(t, err)
	}
	rows := func(table string) string {
		r, err := db.SQL().QueryContext(ctx, "SELECT CAST(COLUMNS(*) AS VARCHAR) FROM "+sqltext.QuoteIdent(table)+" ORDER BY ALL")
		require.NoError(t, err)
		defer r.Close()
		cols, err := r.Columns()
		require.NoError(t, err)
		var b strings.Builder
		for r.Next() {
			vals := make([]any, len(cols))
			ptrs := make([]any, len(cols))
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			require.NoError(t, r.Scan(ptrs...))
			fmt.Fprintln(&b, vals...)
		}
		require.NoError(t, r.Err())
		return b.String()
	}
	// runModels runs every model and its twin, and requires each
	// incremental one to have gone as want ("full", or its own mode) and
	// to hold its twin's rows.
	runModels := func(step string, incremental bool) {
		for i, j := range incr {
			res, err := db.Run(ctx, j, run.RunOptions{})
			require.NoError(t, err, step)
			want := "full"
			if incremental {
				want = j.Incremental
			}
			require.Equal(t, want, res.Incremental, "%s: %s: %s", step, j.Name, res.IncrementalNote)
			_, err = db.Run(ctx, full[i], run.RunOptions{})
			require.NoError(t, err, step)
			require.Equal(t, rows(full[i].Table), rows(j.Table), "%s: %s holds the full rebuild's rows", step, j.Name)
		}
	}
	rollback := func(to int64) {
		_, err := history.Rollback(ctx, db, vc, to, history.RollbackOptions{})
		require.NoError(t, err)
	}

	apply("a 1 x1", "b 1 x1", "c 1 y1", "d 1 z1", "g 1 w1", "h 1 w2") // vc 1: g and h never change
	runModels("first", false)
	apply("a 2 y1", "b 2", "e 1 x1")    // vc 2: a moves, b goes, e comes
	apply("c 2 q1", "d 2 z2", "b 3 x1") // vc 3: b comes back
	// vc 4 holds snapshot 2's rows: the models, at vc 1, read the changes
	// from 1 to 4 (a rollback's rows are appended like any others).
	rollback(2)
	runModels("rolled back to 2", true)
	apply("a 3 z2", "e 2") // vc 5
	rollback(5)            // vc 6: the rows of 5 again
	runModels("rolled back to 5", true)
	// Below snapshot 6, which the models read: they rebuild whole.
	apply("c 3 x1") // vc 7
	rollback(3)     // vc 8
	runModels("rolled back below", false)
	apply("f 1 y1", "a 4 x1") // vc 9
	runModels("after", true)
}
