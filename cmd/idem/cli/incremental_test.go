package cli

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/idem-dev/idem/cmd/idem/cli/internal/clitest"
	"github.com/stretchr/testify/require"
)

// TestIncrementalModel: a model with [target] incremental = "partition"
// recomputes only the days whose upstream rows changed, and exports the
// same bytes as the same model rebuilt whole, before and after an erasure
// upstream (which recomputes both); every snapshot reruns and reproduces;
// a model that cannot be restricted to partitions is refused with exit 2.
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
	run := p.Idem("run", p.Dir)
	require.Equal(t, 0, run.Code, run.Stderr)

	same := func(step string) {
		t.Helper()
		var sums []string
		for _, name := range []string{"daily", "daily_full"} {
			r := p.Idem("export", p.Path(name+".toml"), "--out", p.Path(fmt.Sprintf("%s-%s.csv", name, step)), "--json")
			require.Equal(t, 0, r.Code, r.Stderr)
			var res struct {
				SHA256 string `json:"sha256"`
			}
			require.NoError(t, json.Unmarshal([]byte(r.Stdout), &res))
			sums = append(sums, res.SHA256)
		}
		require.Equal(t, sums[0], sums[1], "%s: the incremental model exports the bytes of the full rebuild", step)
	}
	same("first")

	// Day 2024-01-02 changes (id 3) and day 2024-01-03 is new (id 4);
	// day 2024-01-01 is as it was.
	p.Write("input/src2.csv", "id,day,zone,amount\n1,2024-01-01,1,10.00\n2,2024-01-01,2,5.50\n3,2024-01-02,1,9.75\n4,2024-01-03,2,1.00\n")
	require.Equal(t, 0, p.Idem("run", p.Path("src.toml"), "--input", p.Path("input/src2.csv")).Code)
	r := p.Idem("run", p.Path("daily.toml"), "--json")
	require.Equal(t, 0, r.Code, r.Stderr)
	var res struct {
		Decision    string   `json:"decision"`
		Incremental string   `json:"incremental"`
		Partitions  []string `json:"partitions"`
		RowsIn      int64    `json:"rows_in"`
		RowsWritten int64    `json:"rows_written"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.Stdout), &res), r.Stdout)
	require.Equal(t, "loaded", res.Decision)
	require.Equal(t, "partition", res.Incremental)
	require.Equal(t, []string{"2024-01-02", "2024-01-03"}, res.Partitions)
	require.Equal(t, int64(2), res.RowsIn, "only the two days' rows are recomputed")
	require.Equal(t, int64(3), res.RowsWritten, "the changed row deleted and written, the new one written")
	require.Equal(t, 0, p.Idem("run", p.Path("daily_full.toml")).Code)
	same("second")

	// An erasure upstream recomputes both models; the next change still
	// goes by partition and gives the full rebuild's bytes.
	er := p.Idem("erase", p.Path("src.toml"), "--key", "3")
	require.Equal(t, 0, er.Code, er.Stderr)
	require.Contains(t, er.Stdout, "daily: recomputed without the subject")
	same("erased")
	p.Write("input/src3.csv", "id,day,zone,amount\n1,2024-01-01,1,12.00\n2,2024-01-01,2,5.50\n4,2024-01-03,2,1.00\n")
	require.Equal(t, 0, p.Idem("run", p.Path("src.toml"), "--input", p.Path("input/src3.csv")).Code)
	text := p.Idem("run", p.Dir)
	require.Equal(t, 0, text.Code, text.Stderr)
	require.Contains(t, text.Stdout, "  partitions 2024-01-01 (recomputed: their upstream rows changed)\n")
	same("third")

	for s := 1; s <= 4; s++ {
		rr := p.Idem("rerun", p.Path("daily.toml"), "--snapshot", fmt.Sprint(s))
		require.Equal(t, 0, rr.Code, "rerun %d: %s%s", s, rr.Stdout, rr.Stderr)
		require.Contains(t, rr.Stdout, fmt.Sprintf("daily: snapshot %d reproduced", s))
	}

	// A window over every day cannot be recomputed by partition.
	p.Write("models/daily.sql", "SELECT day, zone, sum(amount) OVER (ORDER BY day) AS running FROM {{upstream:src}}\n")
	bad := p.Idem("run", p.Path("daily.toml"))
	require.Equal(t, 2, bad.Code, bad.Stdout)
	require.Contains(t, bad.Stderr, "daily.toml:11: target.incremental: model "+p.Path("models/daily.sql")+" line 1 cannot be recomputed by partition day: window function sum() is not partitioned by day (add PARTITION BY day)")
}
