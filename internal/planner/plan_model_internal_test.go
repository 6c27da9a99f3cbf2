package planner

import (
	"context"
	"database/sql"
	"strings"
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
	tx := memoryTx(t)
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

// TestSameQueryLineage: column-level lineage through CTEs and subqueries.
// A column added without touching the existing ones is non-breaking
// wherever it is added; a changed column, filter or join is breaking, and
// so is an added column that reaches a DISTINCT, GROUP BY ALL, NATURAL
// JOIN or UNION through *.
func TestSameQueryLineage(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tx := memoryTx(t)
	const base = `WITH orders AS (
    SELECT id, customer, amount FROM o WHERE amount > 0
), joined AS (
    SELECT orders.*, c.name FROM orders JOIN c ON c.id = orders.customer
)
SELECT * FROM joined`
	const sub = "SELECT s.id, s.total FROM (SELECT id, sum(amount) AS total FROM o GROUP BY id) AS s"
	for _, tc := range []struct {
		name, before, after, why string
	}{
		{"column added in the final CTE", base, `WITH orders AS (
    SELECT id, customer, amount FROM o WHERE amount > 0
), joined AS (
    SELECT orders.*, c.name, c.city FROM orders JOIN c ON c.id = orders.customer
)
SELECT * FROM joined`, ""},
		{"column added in the first CTE", base, `WITH orders AS (
    SELECT id, customer, amount, amount * 2 AS doubled FROM o WHERE amount > 0
), joined AS (
    SELECT orders.*, c.name FROM orders JOIN c ON c.id = orders.customer
)
SELECT * FROM joined`, ""},
		{"column added in the outer select", base, strings.Replace(base, "SELECT * FROM joined", "SELECT *, 1 AS one FROM joined", 1), ""},
		{"column added in a subquery and the outer select", sub, "SELECT s.id, s.total, s.n FROM (SELECT id, sum(amount) AS total, count(*) AS n FROM o GROUP BY id) AS s", ""},
		{"column added in a CTE under UNION ALL", "WITH a AS (SELECT id FROM o) SELECT * FROM a UNION ALL SELECT * FROM a", "WITH a AS (SELECT id, amount FROM o) SELECT * FROM a UNION ALL SELECT * FROM a", ""},
		{"spacing inside a join", base, strings.Replace(base, "JOIN c ON c.id = orders.customer", "JOIN   c   ON c.id   =   orders.customer", 1), ""},
		{"column changed in a CTE", base, strings.Replace(base, "customer, amount FROM", "customer, amount * 100 AS amount FROM", 1), "a result column's expression changed or moved"},
		{"column changed in a subquery", sub, strings.Replace(sub, "sum(amount)", "max(amount)", 1), "a result column's expression changed or moved"},
		{"filter changed in a CTE", base, strings.Replace(base, "amount > 0", "amount > 1", 1), "the query changed beyond its select list"},
		{"join changed in a CTE", base, strings.Replace(base, "JOIN c ON", "LEFT JOIN c ON", 1), "the query changed beyond its select list"},
		{"join condition changed", base, strings.Replace(base, "c.id = orders.customer", "c.id = orders.id", 1), "the query changed beyond its select list"},
		{"column added under SELECT DISTINCT *", "WITH a AS (SELECT id FROM o) SELECT DISTINCT * FROM a", "WITH a AS (SELECT id, amount FROM o) SELECT DISTINCT * FROM a", "a column added under a SELECT DISTINCT with * can change its rows"},
		{"column added under GROUP BY ALL with *", "SELECT *, count(*) AS n FROM (SELECT id FROM o) GROUP BY ALL", "SELECT *, count(*) AS n FROM (SELECT id, amount FROM o) GROUP BY ALL", "a column added under a GROUP BY ALL with *"},
		{"column added under a NATURAL JOIN", "WITH a AS (SELECT id FROM o) SELECT * FROM a NATURAL JOIN c", "WITH a AS (SELECT id, name FROM o) SELECT * FROM a NATURAL JOIN c", "a column added under a NATURAL JOIN"},
		{"column added under UNION", "WITH a AS (SELECT id FROM o) SELECT * FROM a UNION SELECT * FROM a", "WITH a AS (SELECT id, amount FROM o) SELECT * FROM a UNION SELECT * FROM a", "columns added under a UNION, EXCEPT or INTERSECT"},
		{"column added to a DISTINCT CTE", "WITH a AS (SELECT DISTINCT id FROM o) SELECT id FROM a", "WITH a AS (SELECT DISTINCT id, amount FROM o) SELECT id FROM a", "columns added to a SELECT DISTINCT"},
		{"CTE added", base, strings.Replace(base, "WITH orders AS", "WITH extra AS (SELECT 1), orders AS", 1), "the query changed beyond its select list"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			same, why, err := sameQuery(ctx, tx, tc.before, tc.after)
			require.NoError(t, err)
			require.Equal(t, tc.why == "", same, why)
			require.Contains(t, why, tc.why)
		})
	}
}

// memoryTx is a transaction on an in-memory database, rolled back when
// the test ends.
func memoryTx(t *testing.T) *sql.Tx {
	t.Helper()
	ctx := context.Background()
	db, err := run.OpenMemory(ctx, "")
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	tx, err := db.BeginTx(ctx, nil)
	require.NoError(t, err)
	t.Cleanup(func() { tx.Rollback() })
	return tx
}
