package run

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idem-dev/idem/internal/job"
	"github.com/idem-dev/idem/internal/report"
	"github.com/idem-dev/idem/pipelines"
)

// TestIncrementalLoad: an incremental model whose SELECT cannot be
// restricted to the partitions (or keys) that changed is refused at load (a
// *report.JobFileError, exit 2) naming the job file's line of incremental,
// the model file's line and why; one that can is loaded.
func TestIncrementalLoad(t *testing.T) {
	t.Parallel()
	const head = "name = \"m\"\npipeline = \"select\"\n[input]\n# upstream: a and b, as the model reads them\n[transform]\nsql = \"m.sql\"\n"
	const target = "[target]\nkey = [\"day\", \"k\"]\npartition_by = \"day\"\nincremental = \"partition\"\n"
	const byKey = "[target]\nkey = [\"k\", \"j\"]\nincremental = \"key\"\n"
	cases := []struct {
		name, model, target, want string
	}{
		{"plain", "SELECT day, k, v FROM {{upstream:a}} WHERE v > 0", target, ""},
		{"star", "SELECT * FROM {{upstream:a}}", target, ""},
		{"star excluding another column", "SELECT * EXCLUDE (v) FROM {{upstream:a}}", target, ""},
		{"star excluding day", "SELECT * EXCLUDE (day), 1 AS day FROM {{upstream:a}}", target, "SELECT * here"},
		{"group by", "SELECT day, k, sum(v) AS v FROM {{upstream:a}} GROUP BY day, k", target, ""},
		{"group by all", "SELECT day, k, count(*) AS n FROM {{upstream:a}} GROUP BY ALL HAVING count(*) > 1", target, ""},
		{"window by day", "SELECT day, k, row_number() OVER (PARTITION BY day ORDER BY k) AS rn FROM {{upstream:a}}", target, ""},
		{"join on day", "SELECT a.day, a.k, b.w FROM {{upstream:a}} AS a LEFT JOIN {{upstream:b}} AS b ON a.day = b.day AND a.k = b.k", target, ""},
		{"semi join", "SELECT day, k FROM {{upstream:a}} AS a SEMI JOIN {{upstream:b}} AS b ON a.day = b.day AND a.k = b.k", target, ""},
		{"join using", "SELECT day, k, w FROM {{upstream:a}} JOIN {{upstream:b}} USING (day, k)", target, ""},
		{"cte and subquery", "WITH x AS (SELECT day, k, v FROM {{upstream:a}} WHERE v > 0)\nSELECT day, k, n FROM (SELECT day, k, count(*) AS n FROM x GROUP BY day, k) AS s", target, ""},
		{"distinct on day", "SELECT DISTINCT ON (day, k) day, k, v FROM {{upstream:a}} ORDER BY day, k, v", target, ""},

		{"limit", "SELECT day, k, v FROM {{upstream:a}}\nORDER BY v LIMIT 10", target, "m.sql line 2 cannot be recomputed by partition day: LIMIT or OFFSET picks rows across partitions"},
		{"window across partitions", "SELECT day, k,\n  sum(v) OVER (ORDER BY k) AS run FROM {{upstream:a}}", target, "m.sql line 2 cannot be recomputed by partition day: window function sum() is not partitioned by day"},
		{"aggregate without group by", "SELECT max(day) AS day, 1 AS k, count(*) AS n FROM {{upstream:a}}", target, "aggregate max() without GROUP BY day"},
		{"group by without day", "SELECT day, k FROM (SELECT min(day) AS day, k FROM {{upstream:a}} GROUP BY k)", target, "GROUP BY without day"},
		{"rollup", "SELECT day, k, sum(v) AS v FROM {{upstream:a}} GROUP BY ROLLUP (k, day)", target, "a grouping set without day"},
		{"join not on day", "SELECT a.day, a.k, b.w FROM {{upstream:a}} AS a JOIN {{upstream:b}} AS b ON a.k = b.k", target, "a join not on equal day"},
		{"join on one side's day", "SELECT a.day, a.k FROM {{upstream:a}} AS a JOIN {{upstream:b}} AS b ON a.day = a.day", target, "a join not on equal day"},
		{"cross join", "SELECT a.day, a.k FROM {{upstream:a}} AS a, {{upstream:b}} AS b WHERE a.day = b.day", target, "CROSS join"},
		{"full join", "SELECT a.day, a.k FROM {{upstream:a}} AS a FULL JOIN {{upstream:b}} AS b ON a.day = b.day", target, "FULL join: only INNER, LEFT, SEMI and ANTI joins"},
		{"computed day", "SELECT day + 1 AS day, k FROM {{upstream:a}}", target, "the result's day is computed"},
		{"renamed day", "SELECT d AS day, k FROM (SELECT day AS d, k FROM {{upstream:a}})", target, "has no column day read as is"},
		{"scalar subquery", "SELECT day, k, (SELECT max(v) FROM {{upstream:b}}) AS top FROM {{upstream:a}}", target, "a subquery in an expression"},
		{"in subquery", "SELECT day, k FROM {{upstream:a}} WHERE k IN (SELECT k FROM {{upstream:b}})", target, "a subquery in an expression"},
		{"union", "SELECT day, k FROM {{upstream:a}} UNION ALL SELECT day, k FROM {{upstream:b}}", target, "a set operation (UNION)"},
		{"table function", "SELECT day, k FROM {{upstream:a}} JOIN range(3) AS r(i) ON a.day = r.i", target, "TABLE_FUNCTION"},
		{"sample", "SELECT day, k FROM {{upstream:a}} USING SAMPLE 10%", target, "a sample picks rows"},
		{"star over join", "SELECT * FROM {{upstream:a}} JOIN {{upstream:b}} USING (day, k)", target, "SELECT * here"},
		{"distinct on without day", "SELECT DISTINCT ON (k) day, k FROM {{upstream:a}}", target, "DISTINCT ON without day"},

		{"not a key column", "SELECT day, k FROM {{upstream:a}}", "[target]\nkey = [\"k\"]\npartition_by = \"day\"\nincremental = \"partition\"\n", "m.toml:9: target.partition_by: an incremental model's partition column must be one of its key columns"},
		{"no partition_by", "SELECT day, k FROM {{upstream:a}}", "[target]\nkey = [\"k\"]\nincremental = \"partition\"\n", "m.toml:9: target.incremental: incremental = \"partition\" recomputes the partitions whose upstream rows changed: add partition_by"},
		{"unknown mode", "SELECT day, k FROM {{upstream:a}}", "[target]\nkey = [\"k\"]\nincremental = \"time\"\n", `target.incremental: must be "partition" or "key" (got "time")`},

		// By key: the key columns (k, j) in place of the partition column.
		{"key: plain", "SELECT k, j, v FROM {{upstream:a}} WHERE v > 0", byKey, ""},
		{"key: group by the key and more", "SELECT j, k, v, count(*) AS n FROM {{upstream:a}} GROUP BY v, k, j", byKey, ""},
		{"key: window by the key", "SELECT k, j, row_number() OVER (PARTITION BY j, k ORDER BY v) AS rn FROM {{upstream:a}}", byKey, ""},
		{"key: join on the key", "SELECT a.k, a.j, b.w FROM {{upstream:a}} AS a LEFT JOIN {{upstream:b}} AS b ON a.k = b.k AND b.j = a.j AND b.w > 0", byKey, ""},
		{"key: join using the key", "WITH x AS (SELECT k, j, max(v) AS v FROM {{upstream:a}} GROUP BY ALL)\nSELECT k, j, v, w FROM x JOIN {{upstream:b}} USING (j, k)", byKey, ""},
		{"key: group by part of the key", "SELECT k, j, count(*) AS n FROM {{upstream:a}}\nGROUP BY k", byKey, "m.sql line 2 cannot be recomputed by key (k, j): GROUP BY without j adds up rows of several keys"},
		{"key: grouping set without a key column", "SELECT k, j, sum(v) AS v FROM {{upstream:a}} GROUP BY GROUPING SETS ((k, j), (k))", byKey, "a grouping set without j"},
		{"key: window by part of the key", "SELECT k, j,\n  sum(v) OVER (PARTITION BY k ORDER BY v) AS s FROM {{upstream:a}}", byKey, "m.sql line 2 cannot be recomputed by key (k, j): window function sum() is not partitioned by j (add PARTITION BY k, j)"},
		{"key: join on part of the key", "SELECT a.k, a.j FROM {{upstream:a}} AS a JOIN {{upstream:b}} AS b ON a.k = b.k", byKey, "a join not on equal j (write ON a.k = b.k AND a.j = b.j AND ..., or USING (k, j))"},
		{"key: aggregate without group by", "SELECT 1 AS k, 2 AS j, sum(v) AS n FROM {{upstream:a}}", byKey, "aggregate sum() without GROUP BY k, j adds up rows of every key"},
		{"key: limit", "SELECT k, j FROM {{upstream:a}} LIMIT 5", byKey, "LIMIT or OFFSET picks rows across keys"},
		{"key: computed key column", "SELECT k, j + 1 AS j FROM {{upstream:a}}", byKey, "the result's j is computed, not the upstream column j as read"},
		{"key: distinct on part of the key", "SELECT DISTINCT ON (k) k, j FROM {{upstream:a}}", byKey, "DISTINCT ON without j picks one row across keys"},
		{"key: union", "SELECT k, j FROM {{upstream:a}} UNION SELECT k, j FROM {{upstream:b}}", byKey, "a set operation (UNION) combines rows idem cannot follow to one key"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			require.NoError(t, os.WriteFile(filepath.Join(dir, "m.sql"), []byte(c.model+"\n"), 0o644))
			path := filepath.Join(dir, "m.toml")
			require.NoError(t, os.WriteFile(path, []byte(head+c.target), 0o644))
			j, err := LoadJob(path, pipelines.FS)
			if c.want == "" {
				require.NoError(t, err)
				mode := job.IncrementalPartition
				if c.target == byKey {
					mode = job.IncrementalKey
				}
				require.Equal(t, mode, j.Incremental)
				return
			}
			require.Error(t, err)
			var jfe *report.JobFileError
			require.True(t, errors.As(err, &jfe), "%T: %v", err, err)
			require.Contains(t, err.Error(), c.want)
			if line := map[string]string{target: "10", byKey: "9"}[c.target]; line != "" {
				// A model refused names the job file's line of
				// incremental and the model file.
				require.Contains(t, err.Error(), "m.toml:"+line+": target.incremental: model "+filepath.Join(dir, "m.sql"))
				require.Contains(t, err.Error(), "; refused (remove incremental to rebuild the whole model on every run)")
			}
		})
	}
}
