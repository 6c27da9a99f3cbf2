package catalog

import (
	"context"
	"database/sql"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

// BenchmarkRecordHistoryWhole times the whole comparison a model's rebuild
// makes (closed rows, no idem_touched): a 200,000-row target of which 2%
// changed, 1% went and 1% came since the open history rows. One thread:
// DuckDB 2.0 with more reads no row of a table filled past a row group in
// the transaction that created it until a checkpoint, in a statement that
// writes (see TestHistoryTableWrittenPastARowGroup).
func BenchmarkRecordHistoryWhole(b *testing.B) {
	ctx := context.Background()
	db, err := sql.Open("duckdb", "?threads=1")
	require.NoError(b, err)
	defer db.Close()
	db.SetMaxOpenConns(1)
	require.NoError(b, Migrate(ctx, db, "mem", nil))
	const n = 200000
	j := testJob("m", "t")
	for _, q := range []string{
		fmt.Sprintf(`CREATE TABLE t AS SELECT i AS id, 'customer-' || i AS name, CAST(i * 1.25 AS DECIMAL(38,2)) AS amount, DATE '2026-01-01' + CAST(i %% 365 AS INTEGER) AS d, i / 7.0 AS v FROM range(%d) r(i)`, n),
		`CREATE TABLE saved_t AS SELECT * FROM t`,
	} {
		_, err := db.ExecContext(ctx, q)
		require.NoError(b, err)
	}
	tx, err := db.BeginTx(ctx, nil)
	require.NoError(b, err)
	_, err = RecordHistory(ctx, tx, j, 1)
	require.NoError(b, err)
	require.NoError(b, tx.Commit())
	_, err = db.ExecContext(ctx, `CREATE TABLE saved_hist AS SELECT * FROM idem.m__history`)
	require.NoError(b, err)
	var opened, closed int64
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		for _, q := range []string{
			`DELETE FROM idem.m__history`, `INSERT INTO idem.m__history SELECT * FROM saved_hist`,
			`DELETE FROM t`, `INSERT INTO t SELECT * FROM saved_t`,
			`UPDATE t SET amount = amount + 1 WHERE id % 50 = 3`,
			`DELETE FROM t WHERE id % 100 = 7`,
			fmt.Sprintf(`INSERT INTO t SELECT i, 'new-' || i, 1.5, DATE '2026-02-01', 0.5 FROM range(%d, %d) r(i)`, n, n+n/100),
		} {
			_, err := db.ExecContext(ctx, q)
			require.NoError(b, err)
		}
		tx, err := db.BeginTx(ctx, nil)
		require.NoError(b, err)
		b.StartTimer()
		_, err = RecordHistory(ctx, tx, j, 2)
		b.StopTimer()
		require.NoError(b, err)
		require.NoError(b, tx.QueryRowContext(ctx, `SELECT count(*) FILTER (WHERE idem_from = 2), count(*) FILTER (WHERE idem_to = 2) FROM idem.m__history`).Scan(&opened, &closed))
		require.NoError(b, tx.Rollback())
		b.StartTimer()
	}
	b.ReportMetric(float64(opened), "opened")
	b.ReportMetric(float64(closed), "closed")
}
