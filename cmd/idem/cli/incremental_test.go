package cli

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/idem-dev/idem/cmd/idem/cli/internal/clitest"
	"github.com/stretchr/testify/require"
)

// TestIncrementalModel: a model with [target] incremental = "partition"
// recomputes only the days whose upstream rows changed, one with
// incremental = "key" only the keys, and each exports the same bytes as
// the same model rebuilt whole, before and after an erasure upstream
// (which recomputes them); every snapshot reruns and reproduces; a model
// that cannot be restricted to partitions (keys) is refused with exit 2.
func TestIncrementalModel(t *testing.T) {
	t.Parallel()
	p := clitest.NewProject(t)
	const sql = "SELECT day, zone, sum(amount) AS total, count(*) AS sales FROM {{upstream:src}} GROUP BY day, zone"
	p.Model("daily_full", "p", []string{"src"}, []string{"day", "zone"}, "", sql)
	p.Write("daily.toml", `name = "daily"
pipeline = "select"
database = "data/p.duckdb"
[input]
upstream = ["src"]
[transform]
sql = "models/daily.sql"
[target]
key = ["day", "zone"]
partition_by = "day"
incremental = "partition"
`+clitest.DuckdbSection)
	p.Write("models/daily.sql", sql+"\n")
	// by_zone is incremental by its key (zone, day), of two columns.
	const byZone = "SELECT zone, day, count(*) AS sales, max(amount) AS top FROM {{upstream:src}} GROUP BY zone, day"
	p.Model("by_zone_full", "p", []string{"src"}, []string{"zone", "day"}, "", byZone)
	p.Write("by_zone.toml", `name = "by_zone"
pipeline = "select"
database = "data/p.duckdb"
[input]
upstream = ["src"]
[transform]
sql = "models/by_zone.sql"
[target]
key = ["zone", "day"]
incremental = "key"
`+clitest.DuckdbSection)
	p.Write("models/by_zone.sql", byZone+"\n")
	run := p.Idem("run", p.Dir)
	require.Equal(t, 0, run.Code, run.Stderr)

	same := func(step string) {
		t.Helper()
		var sums []string
		for _, name := range []string{"daily", "daily_full", "by_zone", "by_zone_full"} {
			r := p.Idem("export", p.Path(name+".toml"), "--out", p.Path(fmt.Sprintf("%s-%s.csv", name, step)), "--json")
			require.Equal(t, 0, r.Code, r.Stderr)
			var res struct {
				SHA256 string `json:"sha256"`
			}
			require.NoError(t, json.Unmarshal([]byte(r.Stdout), &res))
			sums = append(sums, res.SHA256)
		}
		require.Equal(t, sums[0], sums[1], "%s: the incremental model exports the bytes of the full rebuild", step)
		require.Equal(t, sums[2], sums[3], "%s: the model incremental by key exports the bytes of the full rebuild", step)
	}
	same("first")

	// Day 2024-01-02 changes (id 3) and day 2024-01-03 is new (id 4);
	// day 2024-01-01 is as it was.
	p.Write("input/src2.csv", "id,day,zone,amount\n1,2024-01-01,1,10.00\n2,2024-01-01,2,5.50\n3,2024-01-02,1,9.75\n4,2024-01-03,2,1.00\n")
	require.Equal(t, 0, p.Idem("run", p.Path("src.toml"), "--input", p.Path("input/src2.csv")).Code)
	r := p.Idem("run", p.Path("daily.toml"), "--json")
	require.Equal(t, 0, r.Code, r.Stderr)
	type result struct {
		Decision    string   `json:"decision"`
		Incremental string   `json:"incremental"`
		Partitions  []string `json:"partitions"`
		Keys        int64    `json:"keys"`
		RowsIn      int64    `json:"rows_in"`
		RowsWritten int64    `json:"rows_written"`
	}
	var res result
	require.NoError(t, json.Unmarshal([]byte(r.Stdout), &res), r.Stdout)
	require.Equal(t, "loaded", res.Decision)
	require.Equal(t, "partition", res.Incremental)
	require.Equal(t, []string{"2024-01-02", "2024-01-03"}, res.Partitions)
	require.Equal(t, int64(2), res.RowsIn, "only the two days' rows are recomputed")
	require.Equal(t, int64(3), res.RowsWritten, "the changed row deleted and written, the new one written")
	require.Equal(t, 0, p.Idem("run", p.Path("daily_full.toml")).Code)
	// By key: keys (1, 2024-01-02) and (2, 2024-01-03) changed; (1,
	// 2024-01-01) and (2, 2024-01-01) are kept.
	r = p.Idem("run", p.Path("by_zone.toml"), "--json")
	require.Equal(t, 0, r.Code, r.Stderr)
	var byKey result
	require.NoError(t, json.Unmarshal([]byte(r.Stdout), &byKey), r.Stdout)
	require.Equal(t, result{Decision: "loaded", Incremental: "key", Keys: 2, RowsIn: 2, RowsWritten: 3}, byKey)
	require.Equal(t, 0, p.Idem("run", p.Path("by_zone_full.toml")).Code)
	same("second")

	// An erasure upstream recomputes both models; the next change still
	// goes by partition and gives the full rebuild's bytes.
	er := p.Idem("erase", p.Path("src.toml"), "--key", "3")
	require.Equal(t, 0, er.Code, er.Stderr)
	require.Contains(t, er.Stdout, "daily: recomputed without the subject")
	require.Contains(t, er.Stdout, "by_zone: recomputed without the subject")
	same("erased")
	p.Write("input/src3.csv", "id,day,zone,amount\n1,2024-01-01,1,12.00\n2,2024-01-01,2,5.50\n4,2024-01-03,2,1.00\n")
	require.Equal(t, 0, p.Idem("run", p.Path("src.toml"), "--input", p.Path("input/src3.csv")).Code)
	text := p.Idem("run", p.Dir)
	require.Equal(t, 0, text.Code, text.Stderr)
	require.Contains(t, text.Stdout, "  partitions 2024-01-01 (recomputed: their upstream rows changed)\n")
	require.Contains(t, text.Stdout, "  keys      1 recomputed (their upstream rows changed)\n")
	same("third")

	for _, name := range []string{"daily", "by_zone"} {
		for s := 1; s <= 4; s++ {
			rr := p.Idem("rerun", p.Path(name+".toml"), "--snapshot", fmt.Sprint(s))
			require.Equal(t, 0, rr.Code, "rerun %s %d: %s%s", name, s, rr.Stdout, rr.Stderr)
			require.Contains(t, rr.Stdout, fmt.Sprintf("%s: snapshot %d reproduced", name, s))
		}
	}

	// A window over every day cannot be recomputed by partition.
	p.Write("models/daily.sql", "SELECT day, zone, sum(amount) OVER (ORDER BY day) AS running FROM {{upstream:src}}\n")
	bad := p.Idem("run", p.Path("daily.toml"))
	require.Equal(t, 2, bad.Code, bad.Stdout)
	require.Contains(t, bad.Stderr, "daily.toml:11: target.incremental: model "+p.Path("models/daily.sql")+" line 1 cannot be recomputed by partition day: window function sum() is not partitioned by day (add PARTITION BY day)")

	// Grouped by zone alone, a row of by_zone adds up rows of several
	// keys.
	p.Write("models/by_zone.sql", "SELECT zone, min(day) AS day, count(*) AS sales FROM {{upstream:src}}\nGROUP BY zone\n")
	bad = p.Idem("run", p.Path("by_zone.toml"))
	require.Equal(t, 2, bad.Code, bad.Stdout)
	require.Contains(t, bad.Stderr, "by_zone.toml:10: target.incremental: model "+p.Path("models/by_zone.sql")+" line 2 cannot be recomputed by key (zone, day): GROUP BY without day adds up rows of several keys")
}
