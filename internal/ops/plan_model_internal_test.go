package ops

import (
	"context"
	"testing"

	"github.com/idem-dev/idem/internal/run"
	"github.com/stretchr/testify/require"
)

// TestSameQuery: a model's change is non-breaking by its SQL only when the
// new query is the old one with result columns appended (comments,
// spacing and case of keywords aside); anything else may change rows.
func TestSameQuery(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, err := run.OpenMemory(ctx, "")
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	tx, err := db.BeginTx(ctx, nil)
	require.NoError(t, err)
	t.Cleanup(func() { tx.Rollback() })
	const base = "SELECT day, zone, sum(amount) AS total FROM t WHERE amount > 0 GROUP BY day, zone"
	for _, tc := range []struct {
		name, after, why string
	}{
		{"comments and spacing", "-- per day\nselect day,  zone,\n sum(amount) AS total\nFROM t WHERE amount > 0 GROUP BY day, zone", ""},
		{"a column appended", "SELECT day, zone, sum(amount) AS total, count(*) AS n FROM t WHERE amount > 0 GROUP BY day, zone", ""},
		{"a column inserted before the last", "SELECT day, zone, count(*) AS n, sum(amount) AS total FROM t WHERE amount > 0 GROUP BY day, zone", ""},
		{"an expression changed", "SELECT day, zone, sum(amount) * 2 AS total FROM t WHERE amount > 0 GROUP BY day, zone", "a result column's expression changed or moved"},
		{"a column removed", "SELECT day, zone FROM t WHERE amount > 0 GROUP BY day, zone", "a result column's expression changed or moved"},
		{"a filter changed", "SELECT day, zone, sum(amount) AS total FROM t WHERE amount > 1 GROUP BY day, zone", "the query changed beyond its select list"},
		{"a join added", "SELECT day, zone, sum(amount) AS total FROM t JOIN u USING (zone) WHERE amount > 0 GROUP BY day, zone", "the query changed beyond its select list"},
	} {
		same, why, err := sameQuery(ctx, tx, base, tc.after)
		require.NoError(t, err, tc.name)
		require.Equal(t, tc.why == "", same, tc.name)
		require.Contains(t, why, tc.why, tc.name)
	}
	for _, tc := range []struct{ before, after, why string }{
		{"SELECT DISTINCT zone FROM t", "SELECT DISTINCT zone, day FROM t", "columns added to a SELECT DISTINCT"},
		{"SELECT zone, sum(amount) AS s FROM t GROUP BY ALL", "SELECT zone, day, sum(amount) AS s FROM t GROUP BY ALL", "columns added to a GROUP BY ALL"},
		{"SELECT 1 AS a UNION ALL SELECT 2", "SELECT 1 AS a UNION ALL SELECT 3", "the query changed, not only its select list"},
	} {
		same, why, err := sameQuery(ctx, tx, tc.before, tc.after)
		require.NoError(t, err, tc.after)
		require.False(t, same, tc.after)
		require.Contains(t, why, tc.why, tc.after)
	}
}
