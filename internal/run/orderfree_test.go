package run

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idem-dev/idem/internal/job"
	"github.com/idem-dev/idem/internal/pipeline"
)

// TestModelOrderFree: a model runs on the job's threads only when DuckDB's
// bound plan proves its result independent of the order rows arrive in;
// every construct that may depend on it keeps the model on one thread,
// naming it.
func TestModelOrderFree(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := openTestDB(t, t.TempDir())
	_, err := d.SQL().ExecContext(ctx, "CREATE TABLE t (id BIGINT, grp INTEGER, amt DECIMAL(12,2), f DOUBLE, r REAL, name VARCHAR)")
	require.NoError(t, err)
	for _, c := range []struct{ sql, why string }{
		{"SELECT grp, count(*) AS n, sum(amt) AS s, min(f) AS lo, max(f) AS hi, avg(id) AS a, sum(grp) AS g FROM t GROUP BY grp", ""},
		{"SELECT a.grp, count(*) AS n, sum(b.amt) AS s FROM t AS a JOIN t AS b ON a.id = b.id + 1 GROUP BY a.grp", ""},
		{"SELECT id, rank() OVER (PARTITION BY grp ORDER BY amt) AS r, dense_rank() OVER (ORDER BY f) AS d FROM t", ""},
		{"SELECT grp FROM t UNION SELECT grp + 1000 FROM t", ""},
		{"SELECT DISTINCT grp, name FROM t ORDER BY grp", ""},
		{"WITH c AS (SELECT grp, sum(amt) AS s FROM t GROUP BY grp) SELECT * FROM c WHERE s > 0", ""},
		{"SELECT grp, count(DISTINCT name) AS n, bool_and(f > 0) AS b, sum(amt) FILTER (WHERE f > 0) AS s FROM t GROUP BY grp", ""},
		{"SELECT grp, sum(f) AS s FROM t GROUP BY grp", "sum() of double"},
		{"SELECT grp, avg(r) AS s FROM t GROUP BY grp", "avg() of double"},
		{"SELECT id, row_number() OVER (PARTITION BY grp ORDER BY amt) AS rn FROM t", "row_number"},
		{"SELECT grp, string_agg(name, ',') AS names FROM t GROUP BY grp", "string_agg()"},
		{"SELECT grp, string_agg(name, ',' ORDER BY id) AS names FROM t GROUP BY grp", "string_agg() with ORDER BY"},
		{"SELECT * FROM t ORDER BY amt LIMIT 10", "limit"},
		{"SELECT DISTINCT ON (grp) grp, name FROM t ORDER BY grp", "DISTINCT ON"},
		{"SELECT * FROM t USING SAMPLE 10 ROWS (reservoir, 7)", "sample"},
		{"SELECT grp, first(name) AS n FROM t GROUP BY grp", "first()"},
		{"SELECT id, sum(amt) OVER (ORDER BY id) AS running FROM t", "an aggregate window with ORDER BY"},
		{"SELECT id, sum(amt) OVER (PARTITION BY grp) AS total FROM t", ""},
		{"SELECT id, lag(amt) OVER (ORDER BY id) AS prev FROM t", "lag"},
	} {
		j := &job.Job{Name: "m", Table: "m", Pipeline: &pipeline.Pipeline{Name: "select", Model: true}, ModelSQL: c.sql}
		ok, why, err := ModelOrderFree(ctx, d.SQL(), j)
		require.NoError(t, err, c.sql)
		require.Equal(t, c.why == "", ok, "%s: %s", c.sql, why)
		require.Equal(t, c.why, why, c.sql)
	}
}
