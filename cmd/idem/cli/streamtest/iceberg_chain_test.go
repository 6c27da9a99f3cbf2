package streamtest

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idem-dev/idem/cmd/idem/cli/internal/clitest"
	"github.com/idem-dev/idem/internal/lake/laketest"
)

var orderColumns = []laketest.Column{{ID: 1, Name: "order_id", Type: "long"}, {ID: 2, Name: "amount", Type: "decimal(10,2)"}, {ID: 3, Name: "updated_at", Type: "long"}}

// chainFiles writes, in dir, the job orders (merge_by_key over the rows
// appended to lake/orders) and the model totals over it.
func chainFiles(t *testing.T, dir string) (orders, totals string) {
	t.Helper()
	orders, totals = filepath.Join(dir, "orders.toml"), filepath.Join(dir, "totals.toml")
	clitest.WriteFile(t, orders, `name = "orders"
pipeline = "merge_by_key"
transform_version = 1
schema_version = 1
database = "idem.duckdb"

[input]
iceberg = { location = "lake/orders", read = "appends" }

[input.columns]
order_id = "BIGINT"
amount = "DECIMAL(10,2)"
updated_at = "BIGINT"

[target]
key = ["order_id"]
order_by = "updated_at"

[retention]
checkpoint_every = 2   # a rerun of snapshot 3 starts from snapshot 2's checkpoint
`+clitest.DuckdbSection)
	clitest.WriteFile(t, totals, `name = "totals"
pipeline = "select"
transform_version = 1
database = "idem.duckdb"

[input]
upstream = ["orders"]

[transform]
sql = "models/totals"

[target]
key = ["band"]
`+clitest.DuckdbSection)
	clitest.WriteFile(t, filepath.Join(dir, "models/totals/v1.sql"), `SELECT order_id % 2 AS band, count(*) AS orders, sum(amount) AS amount
FROM {{upstream:orders}} WHERE idem_status = 'active' GROUP BY ALL
`)
	return orders, totals
}

// orderRows is a query of n orders from id first at version v.
func orderRows(first, n, v int) string {
	return fmt.Sprintf("SELECT i::BIGINT AS order_id, (i * 1.25 + %d)::DECIMAL(10,2) AS amount, %d::BIGINT AS updated_at FROM range(%d, %d) r(i)", v, v, first, first+n)
}

// TestIcebergChain: a chain whose first job applies the rows appended to
// an Iceberg table (appended three times) and a model over it. Each run
// applies exactly the rows appended since the last, an unchanged lake is
// already committed, every idem snapshot pins its lake snapshot, rerun
// reproduces each (from a checkpoint too), and once a lake snapshot is
// expired the rerun of the idem snapshot that read it is refused (exit 3)
// with nothing changed.
func TestIcebergChain(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	tb := newLake(t, dir, "orders", "5e1f0c2a-2222-4000-8000-000000000002", orderColumns)
	orders, totals := chainFiles(t, dir)
	db := filepath.Join(dir, "idem.duckdb")

	var lake []int64
	for i, q := range []string{orderRows(1, 4, 1), orderRows(3, 4, 2), orderRows(10, 2, 1)} {
		s, err := tb.Append(ctx, q)
		require.NoError(t, err)
		lake = append(lake, s)
		r := runJSON(t, "run", orders)
		require.Equal(t, "applied", r.Decision, "append %d", i+1)
		require.EqualValues(t, []int{4, 4, 2}[i], r.RowsIn, "append %d: exactly the rows appended", i+1)
		require.Equal(t, fmt.Sprintf("iceberg-%d", s), r.BatchID)
		if i != 1 {
			require.Equal(t, "loaded", runJSON(t, "run", totals).Decision)
		}
	}
	require.Equal(t, "already_committed", runJSON(t, "run", orders).Decision, "an unchanged lake")
	require.Equal(t, []int64{1, 2, 3, 4, 5, 6, 10, 11}, clitest.QueryInts(t, db, "SELECT order_id FROM orders WHERE idem_status = 'active' ORDER BY 1"))
	require.Equal(t, []int64{1, 1, 2, 2, 2, 2, 1, 1}, clitest.QueryInts(t, db, "SELECT updated_at FROM orders WHERE idem_status = 'active' ORDER BY order_id"))
	pins := clitest.QueryStrs(t, db, "SELECT json_extract_string(inputs, '$.stream_id') FROM idem.snapshots WHERE job = 'orders' ORDER BY snapshot")
	require.Len(t, pins, 3)
	for i, s := range lake {
		require.Equal(t, fmt.Sprintf("iceberg:%s:%d", tb.UUID, s), pins[i])
	}
	require.Equal(t, []int64{lake[2]}, clitest.QueryInts(t, db, "SELECT next FROM idem.positions WHERE job = 'orders'"))

	reproduced := func(file string, s int) {
		t.Helper()
		rr := clitest.CallIdem(t, "rerun", file, "--snapshot", fmt.Sprint(s), "--json")
		require.Equal(t, 0, rr.Code, rr.Stderr)
		require.Contains(t, rr.Stdout, `"reproduced":true`, "%s snapshot %d", file, s)
	}
	// IDEM_LONG=1 reruns each snapshot from the lake snapshots pinned.
	reproduced(orders, 1)
	for s := 1; s <= 3 && clitest.LongTests(); s++ {
		reproduced(orders, s)
		reproduced(totals, s)
	}

	// The first lake snapshot expires: idem snapshot 1 can no longer be
	// rebuilt from the lake; snapshot 3 still is, from snapshot 2's
	// checkpoint and the rows appended after the lake snapshot 2 reached.
	require.NoError(t, tb.Expire(lake[0]))
	before := clitest.CaptureState(t, db)
	rr := clitest.CallIdem(t, "rerun", orders, "--snapshot", "1")
	require.Equal(t, 3, rr.Code, rr.Stderr)
	require.Contains(t, rr.Stderr, fmt.Sprintf("snapshot 1 of orders read Iceberg snapshot %d of table %s, which the table no longer holds", lake[0], tb.UUID))
	require.Equal(t, before, clitest.CaptureState(t, db))
	rr = clitest.CallIdem(t, "rerun", orders, "--snapshot", "3", "--json")
	require.Equal(t, 0, rr.Code, rr.Stderr)
	require.Contains(t, rr.Stdout, `"reproduced":true`)
	require.Contains(t, rr.Stdout, `"from_checkpoint":2`)
	if clitest.LongTests() {
		reproduced(totals, 3) // a model's rerun reads idem's history, not the lake
	}

	// A fourth append is applied alone, from the committed position.
	s4, err := tb.Append(ctx, orderRows(20, 3, 1))
	require.NoError(t, err)
	r := runJSON(t, "run", orders)
	require.Equal(t, "applied", r.Decision)
	require.EqualValues(t, 3, r.RowsIn)
	require.Equal(t, []int64{s4}, clitest.QueryInts(t, db, "SELECT next FROM idem.positions WHERE job = 'orders'"))
	require.Equal(t, "loaded", runJSON(t, "run", totals).Decision)
	require.Equal(t, []int64{6, 5}, clitest.QueryInts(t, db, "SELECT orders FROM totals ORDER BY band"))
}
