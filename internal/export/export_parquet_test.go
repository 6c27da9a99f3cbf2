package export

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idem-dev/idem/internal/job"
	"github.com/idem-dev/idem/internal/report"
	"github.com/idem-dev/idem/internal/run"
)

// TestParquetRoundTripPerType: an export to Parquet keeps every value of
// every DuckDB type (ParquetTypes): read back with read_parquet, each
// value's text equals the exported one's, and the file's column has the
// documented Parquet type. DuckDB's writer alone wrote HUGEINT as DOUBLE,
// INTERVAL to the millisecond and TIME WITH TIME ZONE shifted to UTC.
func TestParquetRoundTripPerType(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, dir := scratchDuckDB(t)
	for i, tc := range []struct {
		typ    string
		values []string
		// parquet is the column's physical type and converted type in
		// parquet_schema; back is the type read_parquet reads it as.
		parquet, back string
	}{
		{"BOOLEAN", []string{"true", "false"}, "BOOLEAN ", "BOOLEAN"},
		{"TINYINT", []string{"-128", "127"}, "INT32 INT_8", "TINYINT"},
		{"SMALLINT", []string{"-32768", "32767"}, "INT32 INT_16", "SMALLINT"},
		{"INTEGER", []string{"-2147483648", "2147483647"}, "INT32 INT_32", "INTEGER"},
		{"BIGINT", []string{"-9223372036854775808", "9223372036854775807"}, "INT64 INT_64", "BIGINT"},
		{"UTINYINT", []string{"0", "255"}, "INT32 UINT_8", "UTINYINT"},
		{"USMALLINT", []string{"65535"}, "INT32 UINT_16", "USMALLINT"},
		{"UINTEGER", []string{"4294967295"}, "INT32 UINT_32", "UINTEGER"},
		{"UBIGINT", []string{"18446744073709551615"}, "INT64 UINT_64", "UBIGINT"},
		{"HUGEINT", []string{"-" + maxDecimal38, maxDecimal38, "12345678901234567890123", "0"}, "FIXED_LEN_BYTE_ARRAY DECIMAL", "DECIMAL(38,0)"},
		{"UHUGEINT", []string{maxDecimal38, "18446744073709551617"}, "FIXED_LEN_BYTE_ARRAY DECIMAL", "DECIMAL(38,0)"},
		{"DECIMAL(4,1)", []string{"-999.9", "0.1"}, "INT32 DECIMAL", "DECIMAL(4,1)"},
		{"DECIMAL(18,3)", []string{"123456789012345.678"}, "INT64 DECIMAL", "DECIMAL(18,3)"},
		{"DECIMAL(38,10)", []string{"1234567890123456789012345678.0123456789"}, "FIXED_LEN_BYTE_ARRAY DECIMAL", "DECIMAL(38,10)"},
		{"REAL", []string{"'-0.0'", "'nan'", "'inf'", "1.17549435e-38"}, "FLOAT ", "FLOAT"},
		{"DOUBLE", []string{"'-0.0'", "'-inf'", "4.9e-324", "0.1"}, "DOUBLE ", "DOUBLE"},
		{"VARCHAR", []string{"'héllo, \"x\"'", "''"}, "BYTE_ARRAY UTF8", "VARCHAR"},
		{"ENUM('a', 'b')", []string{"'b'"}, "BYTE_ARRAY UTF8", "VARCHAR"},
		{"BIT", []string{"'0101011'"}, "BYTE_ARRAY UTF8", "VARCHAR"},
		{"BIGNUM", []string{"'123456789012345678901234567890123456789012345678901234567890'"}, "BYTE_ARRAY UTF8", "VARCHAR"},
		{"JSON", []string{`'{"a": [1, 2]}'`}, "BYTE_ARRAY JSON", "JSON"},
		{"BLOB", []string{`'\xAA\x00b'`}, "BYTE_ARRAY ", "BLOB"},
		{"UUID", []string{"'3f1c2a4e-0000-4000-8000-00000000abcd'"}, "FIXED_LEN_BYTE_ARRAY ", "UUID"},
		{"DATE", []string{"'-infinity'", "'2024-02-29'", "'infinity'"}, "INT32 DATE", "DATE"},
		{"TIME", []string{"'12:34:56.123456'", "'00:00:00'"}, "INT64 TIME_MICROS", "TIME"},
		{"TIME_NS", []string{"'12:34:56.123456789'"}, "INT64 ", "TIME_NS"},
		{"TIMETZ", []string{"'12:34:56.123456+05:30'", "'01:00:00-11'"}, "BYTE_ARRAY UTF8", "VARCHAR"},
		{"TIMESTAMP", []string{"'2024-01-02 03:04:05.123456'", "'infinity'"}, "INT64 TIMESTAMP_MICROS", "TIMESTAMP"},
		{"TIMESTAMP_S", []string{"'2024-01-02 03:04:05'"}, "INT64 TIMESTAMP_MICROS", "TIMESTAMP"},
		{"TIMESTAMP_MS", []string{"'2024-01-02 03:04:05.123'"}, "INT64 TIMESTAMP_MILLIS", "TIMESTAMP"},
		{"TIMESTAMP_NS", []string{"'2024-01-02 03:04:05.123456789'"}, "INT64 ", "TIMESTAMP_NS"},
		{"TIMESTAMPTZ", []string{"'2024-01-02 03:04:05.123456+00'"}, "INT64 TIMESTAMP_MICROS", "TIMESTAMP WITH TIME ZONE"},
		{"INTERVAL", []string{"INTERVAL '1 year 2 months 3 days 04:05:06.789'", "INTERVAL '36 hours'"}, "FIXED_LEN_BYTE_ARRAY INTERVAL", "INTERVAL"},
		{"INTEGER[]", []string{"[1, NULL, 3]", "[]"}, " LIST", "INTEGER[]"},
		{"INTEGER[2]", []string{"[1, 2]"}, " LIST", "INTEGER[]"},
		{"MAP(VARCHAR, DECIMAL(9,2))", []string{"MAP {'k': 1.25}"}, " MAP", "MAP(VARCHAR, DECIMAL(9,2))"},
		{"STRUCT(a BIGINT, b VARCHAR[])", []string{"{'a': 1, 'b': ['x']}"}, " ", "STRUCT(a BIGINT, b VARCHAR[])"},
		// A UNION reads back as a group of its tag and its members.
		{"UNION(num INTEGER, str VARCHAR)", []string{"union_value(num := 2)", "union_value(str := 'x')"}, " ", "STRUCT(element1 UTINYINT, num INTEGER, str VARCHAR)"},
	} {
		t.Run(tc.typ, func(t *testing.T) {
			table := fmt.Sprintf("t%d", i)
			var rows []string
			for n, v := range tc.values {
				rows = append(rows, fmt.Sprintf("(%d, CAST(%s AS %s))", n, v, tc.typ))
			}
			rows = append(rows, fmt.Sprintf("(%d, NULL)", len(tc.values)))
			_, err := db.SQL().ExecContext(ctx, fmt.Sprintf("CREATE TABLE %s AS SELECT * FROM (VALUES %s) AS v(id, v)", table, strings.Join(rows, ", ")))
			require.NoError(t, err)
			out := filepath.Join(dir, table+".parquet")
			n, _, _, err := CopyTo(ctx, db.SQL(), "SELECT * FROM "+table+" ORDER BY id", out, job.FormatParquet, "", report.Progress{}, nil)
			require.NoError(t, err)
			require.EqualValues(t, len(rows), n)
			var parquet, back string
			require.NoError(t, db.SQL().QueryRowContext(ctx, "SELECT coalesce(type, '') || ' ' || coalesce(converted_type, '') FROM parquet_schema(?) WHERE name = 'v'", out).Scan(&parquet))
			require.Equal(t, tc.parquet, parquet)
			require.NoError(t, db.SQL().QueryRowContext(ctx, "SELECT typeof(v) FROM read_parquet(?) LIMIT 1", out).Scan(&back))
			require.Equal(t, tc.back, back)
			// Every value's text, and its NULL, comes back as exported, in
			// order; an INTERVAL's, equal as DuckDB compares intervals.
			same := "CAST(t.v AS VARCHAR) IS NOT DISTINCT FROM CAST(r.v AS VARCHAR)"
			switch {
			case tc.typ == "INTERVAL":
				same = "t.v IS NOT DISTINCT FROM r.v"
			case strings.HasPrefix(tc.typ, "UNION"):
				same = "union_tag(t.v)::VARCHAR IS NOT DISTINCT FROM ['num', 'str'][r.v.element1 + 1] AND CAST(t.v AS VARCHAR) IS NOT DISTINCT FROM coalesce(CAST(r.v.num AS VARCHAR), r.v.str)"
			}
			var differ int
			require.NoError(t, db.SQL().QueryRowContext(ctx, "SELECT count(*) FROM "+table+" AS t FULL JOIN (SELECT row_number() OVER () - 1 AS id, v FROM read_parquet(?)) AS r USING (id) WHERE NOT ("+same+")", out).Scan(&differ))
			require.Zero(t, differ)
		})
	}
}

// TestParquetRefusesInexact: a value Parquet cannot hold exactly is an
// error naming the column and the value, and nothing is written.
func TestParquetRefusesInexact(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, dir := scratchDuckDB(t)
	for _, tc := range []struct{ query, want string }{
		{"SELECT 1 AS id, HUGEINT '170141183460469231731687303715884105727' AS big", "column big (HUGEINT): 170141183460469231731687303715884105727 is beyond DECIMAL(38,0), the widest exact Parquet integer"},
		{"SELECT 1 AS id, -CAST('1" + strings.Repeat("0", 38) + "' AS HUGEINT) AS big", "column big (HUGEINT): -1" + strings.Repeat("0", 38) + " is beyond DECIMAL(38,0)"},
		{"SELECT 1 AS id, CAST('1" + strings.Repeat("0", 38) + "' AS UHUGEINT) AS big", "column big (UHUGEINT): 1" + strings.Repeat("0", 38) + " is beyond DECIMAL(38,0)"},
		{"SELECT * FROM (VALUES (1, INTERVAL '1 second'), (2, INTERVAL '0.000001 seconds'), (3, INTERVAL '2 days 0.0005 seconds')) AS v(id, span)", "column span (INTERVAL): 00:00:00.000001 has a fraction of a millisecond, which Parquet's INTERVAL drops"},
		{"SELECT 1 AS id, INTERVAL '-36 hours' AS span", "column span (INTERVAL): -36:00:00 is negative, which Parquet's INTERVAL cannot hold"},
		{"SELECT 1 AS id, INTERVAL '1 month -1 day' AS span", "column span (INTERVAL): 1 month -1 day is negative"},
		{"SELECT 1 AS id, [HUGEINT '1'] AS list", "column list (HUGEINT[]): parquet cannot hold this value exactly: a HUGEINT, UHUGEINT, INTERVAL or TIME WITH TIME ZONE inside a nested type"},
		{"SELECT 1 AS id, {'t': TIMETZ '12:00:00+01'} AS s", "column s (STRUCT(t TIME WITH TIME ZONE)): parquet cannot hold this value exactly"},
	} {
		out := filepath.Join(dir, "out.parquet")
		_, _, _, err := CopyTo(ctx, db.SQL(), tc.query, out, job.FormatParquet, "", report.Progress{}, nil)
		require.ErrorIs(t, err, ErrInexactParquet, tc.query)
		require.ErrorContains(t, err, "export to "+out+": "+tc.want)
		require.NoFileExists(t, out)
	}
	// An ENUM label that spells a type is no nested type.
	out := filepath.Join(dir, "enum.parquet")
	_, _, _, err := CopyTo(ctx, db.SQL(), "SELECT CAST('INTERVAL' AS ENUM('INTERVAL', 'HUGEINT')) AS e", out, job.FormatParquet, "", report.Progress{}, nil)
	require.NoError(t, err)
}

// scratchDuckDB opens a database of one thread in a fresh folder, closed
// when the test ends.
func scratchDuckDB(t *testing.T) (*run.DB, string) {
	t.Helper()
	dir := t.TempDir()
	db, err := run.Open(context.Background(), filepath.Join(dir, "x.duckdb"), run.OpenOptions{DuckDB: job.DuckDBSettings{Threads: 1}})
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	return db, dir
}
