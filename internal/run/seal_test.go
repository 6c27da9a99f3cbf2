package run

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/idem-dev/idem/internal/job"
	"github.com/idem-dev/idem/internal/pipeline"
	"github.com/idem-dev/idem/internal/report"
	"github.com/stretchr/testify/require"
)

// TestSealViolations: every route around a job's declared relations that
// DuckDB's parse shows is refused, naming its construct; the job's own
// relations and its upstream are not.
func TestSealViolations(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, err := OpenMemory(ctx, "?threads=1")
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	for _, q := range []string{
		"CREATE TABLE sec (k VARCHAR, v VARCHAR)",
		"CREATE TABLE pub (k VARCHAR, v VARCHAR)",
		"CREATE VIEW sec_view AS SELECT * FROM sec",
	} {
		_, err := db.ExecContext(ctx, q)
		require.NoError(t, err)
	}
	for _, tc := range []struct {
		name, sql string
		construct string // "" accepted
	}{
		{"upstream", "SELECT k, v FROM {{upstream:pub}}", ""},
		{"cte over upstream", "WITH p AS (SELECT * FROM {{upstream:pub}}) SELECT * FROM p", ""},
		{"table function range", "SELECT range AS k FROM range(3)", ""},
		{"unnest", "SELECT unnest([1, 2]) AS k", ""},
		{"seeded sample", "SELECT * FROM {{upstream:pub}} USING SAMPLE 50% (bernoulli, 7)", ""},
		{"plain other job", "SELECT * FROM sec", "sec"},
		{"other job's view", "SELECT * FROM sec_view", "sec_view"},
		{"store catalog", "SELECT * FROM idem_store.main.sec", "idem_store.main.sec"},
		{"main schema", "SELECT * FROM main.sec", "main.sec"},
		{"idem history", `SELECT * FROM idem."sec__history"`, "idem.sec__history"},
		{"idem state", "SELECT * FROM idem.state", "idem.state"},
		{"other catalog", "SELECT * FROM memory.main.sec", "memory.main.sec"},
		{"information schema", "SELECT * FROM information_schema.tables", "information_schema.tables"},
		{"query", "SELECT * FROM query('SELECT * FROM se' || 'c')", "query()"},
		{"query_table", "SELECT * FROM query_table('sec')", "query_table()"},
		{"read_csv", "SELECT * FROM read_csv('/etc/passwd')", "read_csv()"},
		{"read_parquet", "SELECT * FROM read_parquet('x.parquet')", "read_parquet()"},
		{"read_text", "SELECT * FROM read_text('/etc/hostname')", "read_text()"},
		{"glob", "SELECT * FROM glob('/etc/*')", "glob()"},
		{"replacement scan", "SELECT * FROM '/etc/passwd'", "'/etc/passwd'"},
		{"catalog function", "SELECT * FROM duckdb_tables()", "duckdb_tables()"},
		{"subquery in select list", "SELECT (SELECT max(v) FROM sec) AS v, k FROM {{upstream:pub}}", "sec"},
		{"in subquery", "SELECT * FROM {{upstream:pub}} WHERE k IN (SELECT k FROM sec)", "sec"},
		{"cte shadows upstream", "WITH idem_upstream_pub AS (SELECT 1 AS k) SELECT * FROM idem_upstream_pub", "WITH idem_upstream_pub"},
		{"cte named like the upstream job", "WITH pub AS (SELECT 1 AS k) SELECT * FROM pub", "WITH pub"},
		{"import cte", "WITH pub AS (SELECT k, v FROM {{upstream:pub}} WHERE k IS NOT NULL) SELECT * FROM pub", ""},
		{"import cte, upper case", "WITH PUB AS (SELECT * FROM {{upstream:pub}}) SELECT * FROM pub", ""},
		{"cte named like the upstream, reading another job", "WITH pub AS (SELECT * FROM sec) SELECT * FROM pub", "WITH pub"},
		{"cte named like the upstream relation, reading it", "WITH idem_upstream_pub AS (SELECT * FROM {{upstream:pub}}) SELECT * FROM idem_upstream_pub", "WITH idem_upstream_pub"},
		{"cte body reads another job", "WITH p AS (SELECT * FROM sec) SELECT * FROM p", "sec"},
		{"cte out of scope", "SELECT * FROM (WITH sec AS (SELECT 1 AS k) SELECT * FROM sec) JOIN sec USING (k)", "sec"},
		{"getenv", "SELECT getenv('HOME') AS k", "getenv()"},
		{"current_setting", "SELECT current_setting('threads') AS k", "current_setting()"},
		{"random", "SELECT random() AS k", "random()"},
		{"now", "SELECT now() AS k", "now()"},
		{"current_date", "SELECT current_date AS k", "current_date"},
		{"uuid", "SELECT uuid() AS k", "uuid()"},
		{"unseeded sample", "SELECT * FROM {{upstream:pub}} USING SAMPLE 50%", "USING SAMPLE"},
		{"schema-qualified function", "SELECT idem.f(k) FROM {{upstream:pub}}", "idem.f()"},
		{"update another job", "UPDATE sec SET v = 'PWNED'", "UPDATE sec"},
		{"delete erasures", "DELETE FROM idem.erasures", "DELETE FROM idem.erasures"},
		{"copy", "COPY (SELECT 1) TO '/tmp/x.csv'", "COPY"},
		{"macro reading another job", "CREATE TEMP MACRO m() AS TABLE SELECT * FROM sec", "sec"},
		{"pivot", "CREATE TEMP TABLE p AS PIVOT sec ON k USING count(*)", "PIVOT"},
		{"unpivot in a subquery", "SELECT * FROM (UNPIVOT {{upstream:pub}} ON v INTO NAME n VALUE x)", "UNPIVOT"},
		{"explain analyze", "EXPLAIN ANALYZE UPDATE sec SET v = 'x'", "EXPLAIN"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			j := &job.Job{Name: "m", Table: "m", Pipeline: &pipeline.Pipeline{Name: "custom"}, Input: job.InputSpec{Upstream: []string{"pub"}},
				Steps: []pipeline.Step{{Name: "01_model.sql", SQL: "CREATE OR REPLACE TEMP TABLE idem_x AS SELECT 1;\n" + tc.sql + ";\n"}}}
			vs, err := SealViolations(ctx, db, j)
			require.NoError(t, err)
			if tc.construct == "" {
				require.Empty(t, vs)
				return
			}
			require.NotEmpty(t, vs, tc.sql)
			var got []string
			for _, v := range vs {
				got = append(got, v.Construct)
				require.Equal(t, "01_model.sql", v.File)
				require.Equal(t, 2, v.Line, v.Error())
			}
			require.Contains(t, got, tc.construct, strings.Join(got, ", "))
		})
	}
}

// TestSealedRunCatches: what gets past the checks at load is caught in the
// run's transaction: a statement whose bound plan scans another job's
// table (EXPLAIN), and a write that changes another table's rows, columns
// or identity (the tables' identity after the steps). The threads setting
// is 1 during the steps and set back after.
func TestSealedRunCatches(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := openTestDB(t, t.TempDir())
	for _, q := range []string{
		"CREATE TABLE sec (k VARCHAR, v VARCHAR)",
		"INSERT INTO sec VALUES ('a', 'secret')",
		"CREATE TABLE m (k VARCHAR)",
	} {
		_, err := d.SQL().ExecContext(ctx, q)
		require.NoError(t, err)
	}
	for _, tc := range []struct {
		name, sql string
		want      string // "" accepted
	}{
		{"own table", "INSERT INTO m VALUES ('x'); CREATE TEMP TABLE t AS SELECT * FROM m", ""},
		{"scan", "CREATE TEMP TABLE t AS SELECT * FROM sec", "reads table idem_store.main.sec (as DuckDB binds the statement)"},
		{"scan after a comment", "SELECT 1;\n-- next\nCREATE TEMP TABLE t AS\nSELECT * FROM sec", "step 01.sql line 3 reads table idem_store.main.sec"},
		{"update", "UPDATE sec SET v = 'PWNED'", "UPDATE sec writes a table that is not the job's"},
		{"update of own from another", "UPDATE m SET k = sec.v FROM sec", "reads table idem_store.main.sec"},
		{"insert", "INSERT INTO sec VALUES ('b', 'x')", "step 01.sql line 1: INSERT INTO sec writes a table that is not the job's"},
		{"replace", "CREATE OR REPLACE TABLE sec AS SELECT 'a' AS k, 'secret' AS v", "CREATE TABLE sec writes a table that is not the job's"},
		{"alter", "ALTER TABLE sec ADD COLUMN x INT", "ALTER TABLE sec writes a table that is not the job's"},
		{"drop", "DROP TABLE sec", "DROP TABLE sec writes a table that is not the job's"},
		{"new table", "CREATE TABLE other AS SELECT 1 AS x", "CREATE TABLE other writes a table that is not the job's"},
		{"smuggled after $$--$$", "SELECT $$--$$ AS a; INSERT INTO sec VALUES ('c', 'x')", "step 01.sql line 1: INSERT INTO sec writes a table that is not the job's"},
		{"a query DuckDB plans as a write", "INSERT INTO m VALUES ('y')", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			j := &job.Job{Name: "m", Table: "m", Pipeline: &pipeline.Pipeline{Name: "custom"}}
			step := pipeline.Step{Name: "01.sql", SQL: tc.sql}
			tx, err := d.SQL().BeginTx(ctx, nil)
			require.NoError(t, err)
			defer tx.Rollback()
			s, err := newSealedRun(ctx, tx, j)
			require.NoError(t, err)
			restore, err := singleThread(ctx, d.SQL(), tx)
			require.NoError(t, err)
			var threads string
			require.NoError(t, tx.QueryRowContext(ctx, "SELECT current_setting('threads')").Scan(&threads))
			require.Equal(t, "1", threads)
			err = s.exec(ctx, tx, step)
			if err == nil {
				err = s.verify(ctx, tx)
			}
			restore()
			require.NoError(t, tx.QueryRowContext(ctx, "SELECT current_setting('threads')").Scan(&threads))
			require.Equal(t, strconv.Itoa(testThreads()), threads)
			if tc.want == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, report.ErrUsage)
			require.Contains(t, err.Error(), tc.want)
		})
	}
}
