package inspect

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/idem-dev/idem/internal/run"

	"github.com/stretchr/testify/require"
)

// textOf, used where DuckDB cannot render a statement's values itself,
// agrees with DuckDB's own text for every scalar type.
func TestTextOfMatchesDuckDB(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, err := run.Open(ctx, filepath.Join(t.TempDir(), "t.duckdb"), run.OpenOptions{})
	require.NoError(t, err)
	defer db.Close()
	for _, expr := range []string{
		"DATE '2001-01-01'", "DATE '0099-12-31'", "TIME '10:00:00'", "TIME '23:59:59.123'",
		"TIMESTAMP '2001-01-01 10:00:00'", "TIMESTAMP '2001-01-01 10:00:00.5'",
		"TIMESTAMPTZ '2001-01-01 10:00:00+02'", "'2001-01-01 10:00:00.123456789'::TIMESTAMP_NS",
		"'2001-01-01 10:00:00.123'::TIMESTAMP_MS", "'2001-01-01 10:00:00'::TIMESTAMP_S",
		"123.45::DECIMAL(8,4)", "-0.0012::DECIMAL(6,4)", "7::DECIMAL(4,0)", "0::DECIMAL(5,2)",
		"'-12345678901234567890123456.0123456789'::DECIMAL(38,10)",
		"170141183460469231731687303715884105727::HUGEINT", "18446744073709551615::UBIGINT",
		"INTERVAL '1 year 2 months 3 days 04:05:06'", "INTERVAL '1 month'", "INTERVAL '-2 days'",
		"INTERVAL '1.5 seconds'", "INTERVAL '0 seconds'", "-INTERVAL '25 hours'",
		"'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'::UUID", "'\\xAA\\xBBz\\x5C'::BLOB",
		"true", "1.5::DOUBLE", "2.5::FLOAT", "42::TINYINT", "'x'",
	} {
		var want string
		require.NoError(t, db.SQL().QueryRowContext(ctx, "SELECT CAST("+expr+" AS VARCHAR)").Scan(&want), expr)
		rows, err := db.SQL().QueryContext(ctx, "SELECT "+expr)
		require.NoError(t, err, expr)
		cts, err := rows.ColumnTypes()
		require.NoError(t, err)
		require.True(t, rows.Next())
		var v any
		require.NoError(t, rows.Scan(&v))
		require.NoError(t, rows.Close())
		require.Equal(t, want, textOf(v, cts[0].DatabaseTypeName()), expr)
	}
}
