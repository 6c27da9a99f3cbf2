package streamtest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idem-dev/idem/cmd/idem/cli/internal/clitest"
)

// TestIcebergKillReading: runs of a job applying the rows appended to an
// Iceberg table are SIGKILLed while they read (after the stage step read
// the lake's files), before and after COMMIT and at random delays; after
// each append (the first after a batch of the table with no snapshot yet),
// killed runs and then one clean run leave every appended row
// applied exactly once: the ledger's rows add up to the rows appended, the
// position is the lake's current snapshot, and each batch is named after
// the lake snapshot it reached.
func TestIcebergKillReading(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	tb := newLake(t, dir, "orders", "5e1f0c2a-3333-4000-8000-000000000003", orderColumns)
	orders, _ := chainFiles(t, dir)
	db := filepath.Join(dir, "idem.duckdb")
	// The CI tier kills once the input was read and just before COMMIT;
	// IDEM_LONG=1 at every point, then at random delays too.
	faults := []string{"after_step:01_stage.sql", "before_commit", "after_step:03_outcomes.sql", "after_commit"}
	appends := 1 + clitest.KillTrials(t, 2, 3*len(faults))
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 47))
	// A first batch reads the table before its first snapshot: no rows.
	r := runJSON(t, "run", orders)
	require.Equal(t, "applied", r.Decision)
	require.EqualValues(t, 0, r.RowsIn)
	var one time.Duration
	appended := 0
	for i := range appends {
		n := 1 + rng.IntN(5)
		_, err := tb.Append(ctx, orderRows(appended+1, n, 1))
		require.NoError(t, err)
		appended += n
		if i == 0 {
			start := time.Now()
			require.Equal(t, 0, clitest.CallIdem(t, "run", orders).Code)
			one = time.Since(start)
			continue
		}
		fault, delay := faults[(i-1)%len(faults)], time.Duration(0)
		if i > len(faults) && rng.IntN(2) == 0 {
			fault, delay = "", one/4+time.Duration(rng.Int64N(int64(2*one)))
		}
		r := clitest.KillCLI(t, dir, fault, delay, "run", orders)
		require.True(t, r.Killed || (fault == "" && r.Code == 0), "append %d, fault %q: %s", i, fault, r.Stderr)
		r = clitest.KillCLI(t, dir, "", 0, "run", orders)
		require.Equal(t, 0, r.Code, r.Stderr)
	}
	require.Equal(t, []int64{int64(appended)}, clitest.QueryInts(t, db, "SELECT sum(rows_in)::BIGINT FROM idem.ledger WHERE job = 'orders'"))
	require.Equal(t, []int64{int64(appended)}, clitest.QueryInts(t, db, "SELECT count(*) FROM orders WHERE idem_status = 'active'"))
	require.Equal(t, []int64{tb.Snapshot()}, clitest.QueryInts(t, db, "SELECT next FROM idem.positions WHERE job = 'orders'"))
	require.Equal(t, []string{fmt.Sprintf("iceberg-%d", tb.Snapshot())}, clitest.QueryStrs(t, db, "SELECT batch_id FROM idem.ledger WHERE job = 'orders' ORDER BY snapshot DESC LIMIT 1"))
	require.Equal(t, []int64{int64(appends + 1)}, clitest.QueryInts(t, db, "SELECT count(DISTINCT batch_id) FROM idem.ledger WHERE job = 'orders'"))
}
