package cli

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/idem-dev/idem/cmd/idem/cli/internal/clitest"
	"github.com/stretchr/testify/require"
)

// TestModelEditedInPlace: a model written as one file (no transform
// version) edited in place three times, in a project where another model
// reads it. Before each run, plan classifies the change (an added column
// non-breaking; a retyped column, and rows that change, breaking) and names
// the downstream job; each run applies the new version; every snapshot of
// both models then reruns and reproduces, each with the SQL it ran with,
// kept by the database, also after an erasure upstream recomputed each of
// them with its own version; show names the version by its text; diff
// compares the first and last snapshots on their common columns.
func TestModelEditedInPlace(t *testing.T) {
	t.Parallel()
	p := clitest.NewProject(t)
	p.Write("daily.toml", `name = "daily"
pipeline = "select"
database = "data/p.duckdb"
[input]
upstream = ["src"]
[transform]
sql = "models/daily.sql"
[target]
key = ["day", "zone"]
`+clitest.DuckdbSection)
	p.Model("best", "p", []string{"daily"}, []string{"day"}, "", "SELECT day, max(total) AS best FROM {{upstream:daily}} GROUP BY day")
	model := func(sql string) { p.Write("models/daily.sql", "-- totals per day and zone\n"+sql+"\n") }
	model("SELECT day, zone, sum(amount) AS total FROM {{upstream:src}} GROUP BY day, zone")
	require.Equal(t, 0, p.Idem("run", p.Dir).Code)

	type change struct {
		Class          string   `json:"class"`
		ColumnsAdded   []string `json:"columns_added"`
		ColumnsRemoved []string `json:"columns_removed"`
		ColumnsRetyped []struct {
			Name, From, To string
		} `json:"columns_retyped"`
		RowsCompared bool     `json:"rows_compared"`
		RowsChanged  int64    `json:"rows_changed"`
		Downstream   []string `json:"downstream"`
	}
	for i, tc := range []struct {
		sql, class, added, retyped, changed string
		rowsChanged                         int64
	}{
		{"SELECT day, zone, sum(amount) AS total, count(*) AS sales FROM {{upstream:src}} GROUP BY day, zone", "non-breaking", "sales", "", "transform, schema", 0},
		{"SELECT day, zone, sum(amount)::DOUBLE AS total, count(*) AS sales FROM {{upstream:src}} GROUP BY day, zone", "breaking", "", "total DECIMAL(38,2) DOUBLE", "transform, schema", 0},
		{"SELECT day, zone, sum(amount)::DOUBLE AS total, count(*) AS sales FROM {{upstream:src}} WHERE amount > 6 GROUP BY day, zone", "breaking", "", "", "transform", 1},
	} {
		model(tc.sql)
		plan := p.Idem("plan", p.Dir, "--json")
		require.Equal(t, 0, plan.Code, plan.Stderr)
		var plans []struct {
			Job         string  `json:"job"`
			Decision    string  `json:"decision"`
			ModelChange *change `json:"model_change"`
		}
		require.NoError(t, json.Unmarshal([]byte(plan.Stdout), &plans), plan.Stdout)
		var mc *change
		for _, pl := range plans {
			if pl.Job == "daily" {
				require.Equal(t, "loaded", pl.Decision)
				mc = pl.ModelChange
			}
		}
		require.NotNil(t, mc, "edit %d: plan classifies the change: %s", i+1, plan.Stdout)
		require.Equal(t, tc.class, mc.Class, "edit %d", i+1)
		require.Equal(t, []string{"best"}, mc.Downstream, "edit %d", i+1)
		require.Equal(t, tc.added, strings.Join(mc.ColumnsAdded, ","), "edit %d", i+1)
		var retyped []string
		for _, r := range mc.ColumnsRetyped {
			retyped = append(retyped, r.Name+" "+r.From+" "+r.To)
		}
		require.Equal(t, tc.retyped, strings.Join(retyped, ","), "edit %d", i+1)
		require.Empty(t, mc.ColumnsRemoved)
		require.True(t, mc.RowsCompared, "edit %d", i+1)
		require.Equal(t, tc.rowsChanged, mc.RowsChanged, "edit %d", i+1)
		text := p.Idem("plan", p.Path("daily.toml"))
		require.Contains(t, text.Stdout, "  change    "+tc.class+": ")

		res := p.Idem("run", p.Dir)
		require.Equal(t, 0, res.Code, res.Stderr)
		require.Contains(t, res.Stdout, fmt.Sprintf("daily: loaded [%s changed]\n  snapshot  %d", tc.changed, i+2))
	}
	// An erasure upstream recomputes every kept snapshot of the model with
	// the version (columns, types) it was built with.
	er := p.Idem("erase", p.Path("src.toml"), "--key", "3")
	require.Equal(t, 0, er.Code, er.Stderr)
	require.Contains(t, er.Stdout, "daily: recomputed without the subject\n  snapshot  5\n")
	require.Equal(t, []string{"2024-01-01|1|10.0|1"}, clitest.QueryStrs(t, p.DB("p"), `SELECT day || '|' || zone || '|' || total || '|' || sales FROM daily ORDER BY ALL`))
	for _, rr := range []struct {
		job string
		s   int
	}{{"daily", 1}, {"daily", 2}, {"daily", 3}, {"daily", 4}, {"daily", 5}, {"best", 3}} {
		r := p.Idem("rerun", p.Path(rr.job+".toml"), "--snapshot", fmt.Sprint(rr.s))
		require.Equal(t, 0, r.Code, "rerun %s %d: %s%s", rr.job, rr.s, r.Stdout, r.Stderr)
		require.Contains(t, r.Stdout, fmt.Sprintf("%s: snapshot %d reproduced", rr.job, rr.s))
	}
	require.Equal(t, []int64{4}, clitest.QueryInts(t, p.DB("p"), `SELECT count(*) FROM idem.model_texts WHERE job = 'daily'`))
	show := p.Idem("show", p.Path("daily.toml"))
	require.Equal(t, 0, show.Code, show.Stderr)
	require.Regexp(t, `^daily: snapshot 5 is an erasure and writes no packet; it holds the rows of snapshot 4:\ndaily: snapshot 4 \(parent 3\)\n  pipeline  select model sha256 [0-9a-f]{12} \(its text\), columns from its SELECT\n`, show.Stdout)
	diff := p.Idem("diff", p.Path("daily.toml"), "--from", "1", "--to", "5")
	require.Equal(t, 0, diff.Code, diff.Stderr)
	require.Contains(t, diff.Stdout, "  columns  +sales, ~total DECIMAL(38,2) -> DOUBLE (rows compared on the columns both have)\n")
	require.Contains(t, diff.Stdout, "  removed  1  2024-01-01|2\n")

	// The database keeps each version's text: with the file gone, the
	// snapshot it last built still reruns. (The new text still reads src:
	// a declared upstream the model never reads is refused at load.)
	model("SELECT 1 AS day, 2 AS zone FROM {{upstream:src}}")
	r := p.Idem("rerun", p.Path("daily.toml"), "--snapshot", "3")
	require.Equal(t, 0, r.Code, r.Stderr)
}
