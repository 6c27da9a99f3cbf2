package export

import (
	"context"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/idem-dev/idem/internal/catalog"
	"github.com/idem-dev/idem/internal/job"
	"github.com/idem-dev/idem/internal/report"
	"github.com/idem-dev/idem/internal/run"
	"github.com/idem-dev/idem/internal/sqltext"

	"github.com/stretchr/testify/require"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

// exportGoldenCase is one table of the canonical export goldens: rows of
// one column type (with an id that orders them) made by query, stored in a
// table and exported as a snapshot is. timeZone, when set, is the session's
// TimeZone during the export in place of idem's UTC.
type exportGoldenCase struct {
	name     string
	setup    string
	query    string
	timeZone string
}

// exportGoldenCases hold the edge values of every column type a target may
// have. Their CSV bytes are idem's definition of a snapshot's sha256 (the
// export, the release packet and rerun all hash them), so a change of the
// engine that changes one byte must fail here and be handled by idem, not
// by a new golden.
var exportGoldenCases = []exportGoldenCase{
	{name: "double", query: `SELECT * FROM (VALUES
		(1, 0.0::DOUBLE), (2, -0.0::DOUBLE), (3, 0.1::DOUBLE), (4, 1.0::DOUBLE / 3), (5, 100.0::DOUBLE), (6, -1.5::DOUBLE),
		(7, 1.7976931348623157e308::DOUBLE), (8, -1.7976931348623157e308::DOUBLE), (9, 2.2250738585072014e-308::DOUBLE),
		(10, 4.9406564584124654e-324::DOUBLE), (11, 2.225073858507201e-308::DOUBLE), (12, 1e-7::DOUBLE), (13, 1e15::DOUBLE),
		(14, 1e16::DOUBLE), (15, 1e21::DOUBLE), (16, 123456789012345678901234567890::DOUBLE), (17, 0.1::DOUBLE + 0.2::DOUBLE),
		(18, 'NaN'::DOUBLE), (19, 'Infinity'::DOUBLE), (20, '-Infinity'::DOUBLE), (21, -2.5e-10::DOUBLE), (22, 9007199254740993::DOUBLE),
		(23, 5e-324::DOUBLE * 3), (24, NULL::DOUBLE), (25, 1e22::DOUBLE), (26, 1e-5::DOUBLE), (27, 123456.789::DOUBLE)
	) t(id, v)`},
	{name: "real", query: `SELECT * FROM (VALUES
		(1, 0.0::REAL), (2, -0.0::REAL), (3, 0.1::REAL), (4, (1.0::REAL / 3)::REAL), (5, 3.4028235e38::REAL), (6, -3.4028235e38::REAL),
		(7, 1.17549435e-38::REAL), (8, 1.4e-45::REAL), (9, 1.1754942e-38::REAL), (10, 16777217::REAL), (11, 1e10::REAL), (12, 1e-7::REAL),
		(13, 'NaN'::REAL), (14, 'Infinity'::REAL), (15, '-Infinity'::REAL), (16, NULL::REAL), (17, 123456.789::REAL), (18, 0.1::DOUBLE::REAL::DOUBLE::REAL)
	) t(id, v)`},
	{name: "decimal", query: `SELECT * FROM (VALUES
		(1, 0::DECIMAL(4,1), 0::DECIMAL(9,4), 0::DECIMAL(18,6), 0::DECIMAL(38,10), 0::DECIMAL(38,0), 0::DECIMAL(3,3)),
		(2, 999.9::DECIMAL(4,1), 99999.9999::DECIMAL(9,4), 999999999999.999999::DECIMAL(18,6),
			9999999999999999999999999999.9999999999::DECIMAL(38,10), 99999999999999999999999999999999999999::DECIMAL(38,0), 0.999::DECIMAL(3,3)),
		(3, -999.9::DECIMAL(4,1), -99999.9999::DECIMAL(9,4), -999999999999.999999::DECIMAL(18,6),
			-9999999999999999999999999999.9999999999::DECIMAL(38,10), -99999999999999999999999999999999999999::DECIMAL(38,0), -0.999::DECIMAL(3,3)),
		(4, -0.5::DECIMAL(4,1), 0.0001::DECIMAL(9,4), -0.000001::DECIMAL(18,6), 0.0000000001::DECIMAL(38,10), 1::DECIMAL(38,0), 0.001::DECIMAL(3,3)),
		(5, 1.0::DECIMAL(4,1), 1.5::DECIMAL(9,4), 10::DECIMAL(18,6), 12345.678::DECIMAL(38,10), -1::DECIMAL(38,0), NULL::DECIMAL(3,3)),
		(6, NULL, NULL, NULL, NULL, NULL, -0.0::DECIMAL(3,3))
	) t(id, d4_1, d9_4, d18_6, d38_10, d38_0, d3_3)`},
	{name: "integers", query: `SELECT * FROM (VALUES
		(1, '-128'::TINYINT, '-32768'::SMALLINT, '-2147483648'::INTEGER, '-9223372036854775808'::BIGINT,
			'-170141183460469231731687303715884105728'::HUGEINT, 0::UTINYINT, 0::USMALLINT, 0::UINTEGER, 0::UBIGINT, 0::UHUGEINT),
		(2, 127::TINYINT, 32767::SMALLINT, 2147483647::INTEGER, 9223372036854775807::BIGINT,
			170141183460469231731687303715884105727::HUGEINT, 255::UTINYINT, 65535::USMALLINT, 4294967295::UINTEGER,
			18446744073709551615::UBIGINT, 340282366920938463463374607431768211455::UHUGEINT),
		(3, 0::TINYINT, -1::SMALLINT, 0::INTEGER, -1::BIGINT, -1::HUGEINT, 1::UTINYINT, 1::USMALLINT, 1::UINTEGER, 1::UBIGINT, 1::UHUGEINT),
		(4, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL)
	) t(id, i8, i16, i32, i64, i128, u8, u16, u32, u64, u128)`},
	{name: "date_time", query: `SELECT * FROM (VALUES
		(1, DATE '1970-01-01', TIME '00:00:00', TIMETZ '00:00:00+00'),
		(2, DATE '0001-01-01', TIME '23:59:59.999999', TIMETZ '23:59:59.999999-15:59'),
		(3, DATE '9999-12-31', TIME '12:34:56.5', TIMETZ '12:34:56+05:30'),
		(4, DATE '2024-02-29', TIME '01:02:03.000001', TIMETZ '01:02:03.000001+15:59'),
		(5, '0044-03-15 (BC)'::DATE, TIME '24:00:00', TIMETZ '10:00:00-08'),
		(6, 'infinity'::DATE, NULL, NULL),
		(7, '-infinity'::DATE, TIME '10:00:00', TIMETZ '10:00:00+00:00:01'),
		(8, NULL, NULL, NULL)
	) t(id, d, tm, tmtz)`},
	{name: "timestamp", query: timestampRows},
	{name: "timestamptz_new_york", query: timestampRows, timeZone: "America/New_York"},
	{name: "timestamptz_kathmandu", query: timestampRows, timeZone: "Asia/Kathmandu"},
	{name: "interval", query: `SELECT * FROM (VALUES
		(1, INTERVAL '0 seconds'), (2, INTERVAL '1 year 2 months 3 days 04:05:06.789'), (3, -INTERVAL '1 year 2 months 3 days 04:05:06.789'),
		(4, INTERVAL '1 microsecond'), (5, INTERVAL '36 hours'), (6, INTERVAL '400 days'), (7, INTERVAL '25 months'),
		(8, INTERVAL '-1 day 1 hour'), (9, to_months(2147483647)), (10, to_days(-2147483647)), (11, to_microseconds(9223372036854775807)),
		(12, NULL), (13, INTERVAL '1 month -1 day'), (14, INTERVAL '1.5 seconds')
	) t(id, v)`},
	{name: "strings", query: `SELECT * FROM (VALUES
		(1, 'plain'), (2, ''), (3, NULL), (4, 'with,comma'), (5, 'with "quote"'), (6, 'line' || chr(10) || 'break'),
		(7, 'cr' || chr(13)), (8, 'tab' || chr(9) || 'x'), (9, 'héllo 日本 😀'), (10, ' leading and trailing '), (11, 'NULL'),
		(12, 'back\slash'), (13, '"'), (14, ''''), (15, chr(0) || 'nul'), (16, 'a' || chr(8232) || 'b'), (17, 'e' || chr(769)),
		(18, '#hash'), (19, '=1+1'), (20, ',')
	) t(id, v)`},
	{name: "blob", query: `SELECT * FROM (VALUES
		(1, 'abc'::BLOB), (2, ''::BLOB), (3, NULL::BLOB), (4, '\x00\xFF\x7F\x80'::BLOB), (5, 'a,b"c'::BLOB),
		(6, ('x' || chr(10) || 'y')::BLOB), (7, '\x5C'::BLOB), (8, encode('héllo'))
	) t(id, v)`},
	{name: "boolean_uuid", query: `SELECT * FROM (VALUES
		(1, true, '00000000-0000-0000-0000-000000000000'::UUID),
		(2, false, 'ffffffff-ffff-ffff-ffff-ffffffffffff'::UUID),
		(3, NULL, NULL),
		(4, true, '7FB5A3C1-0D2E-4F6A-8B9C-0123456789AB'::UUID),
		(5, false, '80000000-0000-0000-0000-000000000000'::UUID)
	) t(id, b, u)`},
	{name: "enum", setup: `CREATE TYPE mood AS ENUM ('sad', 'ok', 'with,comma', 'with "quote"', 'ünï')`, query: `SELECT * FROM (VALUES
		(1, 'sad'::mood), (2, 'ok'::mood), (3, 'with,comma'::mood), (4, 'with "quote"'::mood), (5, 'ünï'::mood), (6, NULL::mood)
	) t(id, v)`},
	{name: "list", query: `SELECT * FROM (VALUES
		(1, [1, 2, NULL], ['a,b', 'c"d', NULL, '', 'NULL', 'x y', '[e]', 'f''g'], [0.1, -0.0, 'NaN'::DOUBLE, 1e300], [[1], [], NULL, [2, 3]]),
		(2, [], [], [], []),
		(3, NULL, NULL, NULL, NULL),
		(4, [NULL], [NULL], [NULL], [NULL]),
		(5, ['-9223372036854775808'::BIGINT], ['line' || chr(10) || 'break', 'héllo'], ['Infinity'::DOUBLE], [[NULL]])
	) t(id, ints, strs, dbls, nested)`},
	{name: "array", query: `SELECT * FROM (VALUES
		(1, [1, 2, 3]::INTEGER[3], ['a', NULL]::VARCHAR[2]),
		(2, [NULL, NULL, NULL]::INTEGER[3], ['', 'x,y']::VARCHAR[2]),
		(3, NULL, NULL)
	) t(id, ints, strs)`},
	{name: "timetz_offsets", query: `SELECT * FROM (VALUES
		(1, TIMETZ '10:00:00+00:00:01'), (2, TIMETZ '10:00:00+05:30:45'), (3, TIMETZ '10:00:00-00:00:30'), (4, TIMETZ '10:00:00-15:59:59'),
		(5, TIMETZ '10:00:00+00:01'), (6, TIMETZ '10:00:00-08:00:09'), (7, TIMETZ '10:00:00+15:00:59'), (8, TIMETZ '10:00:00.5+00'), (9, NULL)
	) t(id, v)`},
	{name: "array_nested", query: `SELECT * FROM (VALUES
		(1, [['a', 'b'], ['c,d', '']]::VARCHAR[2][2], ['x'::BLOB, ''::BLOB]::BLOB[2], [TIMETZ '10:00:00+00:00:01', NULL]::TIMETZ[2],
			[{'k': 'a,b'}, {'k': ''}]::STRUCT(k VARCHAR)[2], [DATE '2024-01-01', NULL]::DATE[2], [['x y', ''], []]::VARCHAR[][2],
			['-0.0'::DOUBLE, 'NaN'::DOUBLE]::DOUBLE[2], ['00000000-0000-0000-0000-000000000000']::UUID[1], [MAP {'a': 'b c'}]::MAP(VARCHAR, VARCHAR)[1],
			['NULL', NULL, '[e]', 'f''g', 'line' || chr(10) || 'break', '"q"']::VARCHAR[6]),
		(2, [NULL, ['', NULL]]::VARCHAR[2][2], [NULL, NULL]::BLOB[2], NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL),
		(3, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL)
	) t(id, nested, blobs, tz, structs, dates, lists, dbls, uuids, maps, strs)`},
	{name: "struct", query: `SELECT * FROM (VALUES
		(1, {'a': 1, 'b': 'x'}, {'n': {'d': DATE '2024-01-02', 'l': [1.5, NULL]}, 'k': 'a,b"c'}),
		(2, {'a': NULL, 'b': NULL}, {'n': {'d': NULL, 'l': []}, 'k': ''}),
		(3, NULL, NULL),
		(4, {'a': -1, 'b': 'with ''quote'' and {brace}'}, {'n': NULL, 'k': 'NULL'})
	) t(id, s, nested)`},
	{name: "map", query: `SELECT * FROM (VALUES
		(1, MAP {'k': 1, 'z': NULL}, MAP {1: ['a'], 2: []}),
		(2, MAP {}::MAP(VARCHAR, INTEGER), MAP {}::MAP(INTEGER, VARCHAR[])),
		(3, NULL, NULL),
		(4, MAP {'a,b': -5, 'c"d': 6, '': 7, 'x=y': 8}, MAP {3: NULL})
	) t(id, m, ml)`},
	{name: "union_json_bit", query: `SELECT * FROM (VALUES
		(1, union_value(i := 5)::UNION(i INTEGER, s VARCHAR), '{"a": [1, 2.50, "x"]}'::JSON, '0101'::BIT),
		(2, union_value(s := 'a,b')::UNION(i INTEGER, s VARCHAR), '[]'::JSON, '1'::BIT),
		(3, NULL, NULL, NULL)
	) t(id, u, j, bits)`},
	{name: "nulls", query: `SELECT 1 AS id, NULL::DOUBLE AS d, NULL::DECIMAL(18,2) AS dec, NULL::HUGEINT AS h, NULL::DATE AS dt,
		NULL::TIMESTAMP AS ts, NULL::TIMESTAMPTZ AS tstz, NULL::INTERVAL AS iv, NULL::INTEGER[] AS l,
		NULL::STRUCT(a INTEGER) AS s, NULL::MAP(VARCHAR, INTEGER) AS m, NULL::BLOB AS b, NULL::VARCHAR AS v,
		NULL::BOOLEAN AS bo, NULL::UUID AS u, '' AS empty`},
}

// timestampRows are the timestamp cases, one column per precision and
// TIMESTAMPTZ; exported under idem's UTC and under other zones.
const timestampRows = `SELECT * FROM (VALUES
	(1, TIMESTAMP '1970-01-01 00:00:00', TIMESTAMPTZ '1970-01-01 00:00:00+00', TIMESTAMP_NS '1970-01-01 00:00:00', TIMESTAMP_MS '1970-01-01 00:00:00', TIMESTAMP_S '1970-01-01 00:00:00'),
	(2, TIMESTAMP '2024-03-10 02:30:00.123456', TIMESTAMPTZ '2024-03-10 07:30:00.123456+00', TIMESTAMP_NS '2024-03-10 02:30:00.123456789', TIMESTAMP_MS '2024-03-10 02:30:00.123', TIMESTAMP_S '2024-03-10 02:30:00'),
	(3, TIMESTAMP '0001-01-01 00:00:00', TIMESTAMPTZ '0001-01-01 00:00:00+00', TIMESTAMP_NS '1677-09-22 00:00:00', TIMESTAMP_MS '0001-01-01 00:00:00', TIMESTAMP_S '0001-01-01 00:00:00'),
	(4, TIMESTAMP '9999-12-31 23:59:59.999999', TIMESTAMPTZ '9999-12-31 23:59:59.999999+00', TIMESTAMP_NS '2262-04-11 23:47:16.854775', TIMESTAMP_MS '9999-12-31 23:59:59.999', TIMESTAMP_S '9999-12-31 23:59:59'),
	(5, 'infinity'::TIMESTAMP, 'infinity'::TIMESTAMPTZ, 'infinity'::TIMESTAMP_NS, 'infinity'::TIMESTAMP_MS, 'infinity'::TIMESTAMP_S),
	(6, '-infinity'::TIMESTAMP, '-infinity'::TIMESTAMPTZ, '-infinity'::TIMESTAMP_NS, '-infinity'::TIMESTAMP_MS, '-infinity'::TIMESTAMP_S),
	(7, TIMESTAMP '1969-12-31 23:59:59.999999', TIMESTAMPTZ '1969-12-31 23:59:59.999999+00', TIMESTAMP_NS '1969-12-31 23:59:59.999999999', TIMESTAMP_MS '1969-12-31 23:59:59.999', TIMESTAMP_S '1969-12-31 23:59:59'),
	(8, '0044-03-15 (BC) 12:00:00'::TIMESTAMP, '0044-03-15 (BC) 12:00:00+00'::TIMESTAMPTZ, NULL, NULL, NULL),
	(9, TIMESTAMP '2024-11-03 01:30:00', TIMESTAMPTZ '2024-11-03 05:30:00+00', TIMESTAMP_NS '2024-11-03 01:30:00.000000001', TIMESTAMP_MS '2024-11-03 01:30:00.001', TIMESTAMP_S '2024-11-03 01:30:00'),
	(10, TIMESTAMP '1900-01-01 00:00:00', TIMESTAMPTZ '1900-01-01 00:00:00+00', NULL, NULL, NULL),
	(11, NULL, NULL, NULL, NULL, NULL)
) t(id, ts, tstz, ts_ns, ts_ms, ts_s)`

// TestExportGoldenPerType: every column type exports the bytes of its
// golden file (testdata/export_golden/<case>.csv): the bytes DuckDB 1.5.6's
// COPY wrote, which every sha256 recorded before DuckDB 2.0 is taken over.
// -update rewrites them from the engine's raw COPY and only runs on 1.5.6
// (check out go.mod at v2.10506.0): an engine upgrade must never rewrite a
// golden, idem writes such values as before (catalog.CanonicalCSVQuery).
func TestExportGoldenPerType(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	db, err := run.Open(ctx, filepath.Join(dir, "golden.duckdb"), run.OpenOptions{})
	require.NoError(t, err)
	defer db.Close()
	for _, c := range exportGoldenCases {
		t.Run(c.name, func(t *testing.T) {
			conn, err := db.SQL().Conn(ctx)
			require.NoError(t, err)
			defer conn.Close()
			if c.setup != "" {
				_, err = conn.ExecContext(ctx, c.setup)
				require.NoError(t, err)
			}
			table := sqltext.QuoteIdent("golden_" + c.name)
			_, err = conn.ExecContext(ctx, "CREATE TABLE "+table+" AS "+c.query)
			require.NoError(t, err)
			if c.timeZone != "" {
				_, err = conn.ExecContext(ctx, "SET TimeZone = "+sqltext.SQLString(c.timeZone))
				require.NoError(t, err)
			}
			out := filepath.Join(dir, c.name+".csv")
			_, sum, _, err := CopyTo(ctx, conn, "SELECT * FROM "+table+" ORDER BY id", out, job.FormatCSV, "", report.Progress{}, nil)
			require.NoError(t, err)
			got, err := os.ReadFile(out)
			require.NoError(t, err)
			golden := filepath.Join("testdata", "export_golden", c.name+".csv")
			if *update {
				// A golden is what DuckDB 1.5.6 itself writes: its COPY,
				// without idem's canonical projection.
				var version string
				require.NoError(t, conn.QueryRowContext(ctx, `SELECT version()`).Scan(&version))
				require.Equal(t, "v1.5.6", version, "the goldens are DuckDB 1.5.6's bytes: rewrite them only on 1.5.6")
				raw := filepath.Join(dir, c.name+"-raw.csv")
				_, err = conn.ExecContext(ctx, "COPY (SELECT * FROM "+table+" ORDER BY id) TO "+sqltext.SQLString(raw)+" "+catalog.CSVCopyOptions)
				require.NoError(t, err)
				data, err := os.ReadFile(raw)
				require.NoError(t, err)
				require.NoError(t, os.MkdirAll(filepath.Dir(golden), 0o755))
				require.NoError(t, os.WriteFile(golden, data, 0o644))
			}
			want, err := os.ReadFile(golden)
			require.NoError(t, err)
			require.Equal(t, string(want), string(got), "export of %s differs from %s (sha256 %s)", c.name, golden, sum)
		})
	}
}

// TestExportSessionIsUTC: every connection idem opens exports in UTC,
// whatever the machine's time zone, so a TIMESTAMPTZ exports the bytes of
// the timestamp golden.
func TestExportSessionIsUTC(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, err := run.Open(ctx, filepath.Join(t.TempDir(), "tz.duckdb"), run.OpenOptions{})
	require.NoError(t, err)
	defer db.Close()
	var tz string
	require.NoError(t, db.SQL().QueryRowContext(ctx, `SELECT current_setting('TimeZone')`).Scan(&tz))
	require.Equal(t, "UTC", tz)
}

// TestExportRefusesNestedEngineText: a TIMETZ or an ARRAY nested in a
// LIST, STRUCT or MAP, which DuckDB 2.0 writes otherwise than 1.5.6 and
// idem does not rewrite, is refused by the canonical export, naming the
// column, rather than written with other bytes.
func TestExportRefusesNestedEngineText(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	db, err := run.Open(ctx, filepath.Join(dir, "nested.duckdb"), run.OpenOptions{})
	require.NoError(t, err)
	defer db.Close()
	for _, expr := range []string{
		"[['a', '']::VARCHAR[2]]",
		"{'k': ['a', '']::VARCHAR[2]}",
		"MAP {'k': ['a', '']::VARCHAR[2]}",
		"[TIMETZ '10:00:00+00:00:01']",
		"{'t': TIMETZ '10:00:00+00'}",
	} {
		_, _, _, err := CopyTo(ctx, db.SQL(), "SELECT 1 AS id, "+expr+" AS nested", filepath.Join(dir, "out.csv"), job.FormatCSV, "", report.Progress{}, nil)
		require.ErrorIs(t, err, catalog.ErrEngineText, expr)
		require.ErrorContains(t, err, "column nested", expr)
	}
}

// TestCanonicalExportKeepsOrder: the canonical projection over an ordered
// query keeps its order, on many rows and threads.
func TestCanonicalExportKeepsOrder(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	db, err := run.Open(ctx, filepath.Join(dir, "order.duckdb"), run.OpenOptions{DuckDB: job.DuckDBSettings{Threads: 4}})
	require.NoError(t, err)
	defer db.Close()
	_, err = db.SQL().ExecContext(ctx, `CREATE TABLE t AS SELECT hash(i) AS id, [CAST(i AS VARCHAR), '']::VARCHAR[2] AS a FROM range(300000) r(i)`)
	require.NoError(t, err)
	out := filepath.Join(dir, "out.csv")
	_, _, _, err = CopyTo(ctx, db.SQL(), "SELECT * FROM t ORDER BY id", out, job.FormatCSV, "", report.Progress{}, nil)
	require.NoError(t, err)
	want := filepath.Join(dir, "want.csv")
	_, err = db.SQL().ExecContext(ctx, `COPY (SELECT id, '[' || a[1] || ', ]' AS a FROM t ORDER BY id) TO `+sqltext.SQLString(want)+" "+catalog.CSVCopyOptions)
	require.NoError(t, err)
	got, err := os.ReadFile(out)
	require.NoError(t, err)
	exp, err := os.ReadFile(want)
	require.NoError(t, err)
	require.True(t, string(got) == string(exp), "the canonical export of an ordered query changed its order")
}
