package guardtest

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/idem-dev/idem/internal/report"
	"github.com/idem-dev/idem/internal/run"

	"github.com/idem-dev/idem/cmd/idem/cli/internal/clitest"
	"github.com/stretchr/testify/require"
)

// listFiles is every file and folder under dir with its size and
// modification time, so a new, grown or touched file shows.
func listFiles(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	require.NoError(t, filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		out[p] = info.ModTime().String() + " " + info.Mode().String()
		if !d.IsDir() {
			out[p] += fmt.Sprintf(" %d bytes", info.Size())
		}
		return nil
	}))
	return out
}

// No statement given to idem query writes a database or a file, attaches,
// installs, loads or changes a setting: each exits 1 with a message that
// says why, and every table and every file is as it was.
func TestQueryCannotWrite(t *testing.T) {
	t.Parallel()
	j := clitest.AppliedGuardJob(t)
	outside := t.TempDir()
	secret := filepath.Join(outside, "secret.csv")
	clitest.WriteText(t, secret, "a\n1\n")
	parquet := filepath.Join(outside, "x.parquet")
	clitest.WriteText(t, parquet, "not parquet")
	q := func(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }
	const oneStatement = "idem query runs one read-only statement"
	const noFiles = "file system operations are disabled by configuration"
	const readOnly = "attached in read-only mode"
	cases := []struct {
		name, sql, want string
	}{
		{"issue 12: detach and attach writable", "USE memory; DETACH idem_store; ATTACH " + q(j.DB) + " AS w; " +
			"INSERT INTO w.idem.meta VALUES ('x', 'y'); UPDATE w.idem.jobs SET epoch = 99; SELECT 1", oneStatement},
		{"USE memory", "USE memory", "not SET, USE"},
		{"DETACH the database", "DETACH idem_store", "not DETACH"},
		{"ATTACH in-memory", "ATTACH ':memory:' AS m", "not ATTACH"},
		{"ATTACH a new file", "ATTACH " + q(filepath.Join(j.Dir, "new.duckdb")) + " AS n", "not ATTACH"},
		{"ATTACH the database again", "ATTACH " + q(j.DB) + " AS w", "not ATTACH"},
		{"ATTACH the database read-write", "ATTACH " + q(j.DB) + " AS w (READ_WRITE)", "not ATTACH"},
		{"COPY TO a file", "COPY (SELECT 1) TO " + q(filepath.Join(j.Dir, "out.csv")), noFiles},
		{"COPY a table out", "COPY " + clitest.ApplyTable + " TO " + q(filepath.Join(outside, "out.csv")), noFiles},
		{"EXPORT DATABASE", "EXPORT DATABASE " + q(filepath.Join(outside, "exp")), noFiles},
		{"read_csv of an outside file", "SELECT * FROM read_csv(" + q(secret) + ")", noFiles},
		{"read_text of /etc/passwd", "SELECT * FROM read_text('/etc/passwd')", noFiles},
		{"read_parquet", "SELECT * FROM read_parquet(" + q(parquet) + ")", noFiles},
		{"glob", "SELECT * FROM glob('/etc/*')", noFiles},
		{"a file as a table", "SELECT * FROM " + q(secret), noFiles},
		{"INSTALL", "INSTALL httpfs", "not INSTALL or LOAD"},
		{"LOAD", "LOAD httpfs", "not INSTALL or LOAD"},
		{"SET a setting", "SET threads = 1", "not SET"},
		{"PRAGMA a setting", "PRAGMA threads = 1", "not SET"},
		{"turn external access back on, then read", "SET enable_external_access = true; SELECT * FROM read_text('/etc/passwd')", oneStatement},
		{"unlock", "RESET lock_configuration", "not SET"},
		{"CREATE TABLE", "CREATE TABLE x (a INTEGER)", "not CREATE"},
		{"CREATE TEMP TABLE", "CREATE TEMP TABLE x AS SELECT 1", "not CREATE"},
		{"INSERT", "INSERT INTO idem.meta VALUES ('x', 'y')", "not INSERT"},
		{"UPDATE idem.jobs", "UPDATE idem.jobs SET epoch = 99", "not UPDATE"},
		{"DELETE", "DELETE FROM " + clitest.ApplyTable, "not DELETE"},
		{"DROP", "DROP TABLE " + clitest.ApplyTable, "not DROP"},
		{"CHECKPOINT", "CHECKPOINT", "not CALL or CHECKPOINT"},
		{"FORCE CHECKPOINT", "FORCE CHECKPOINT", "not CALL or CHECKPOINT"},
		{"BEGIN", "BEGIN", "not a transaction"},
		// EXPLAIN ANALYZE runs its statement: DuckDB's read-only attach
		// stops it.
		{"EXPLAIN ANALYZE UPDATE", "EXPLAIN ANALYZE UPDATE idem.jobs SET epoch = 99", readOnly},
		{"read through query()", "SELECT * FROM query('SELECT * FROM read_text(''/etc/passwd'')')", noFiles},
		{"write through query()", "SELECT * FROM query('UPDATE idem.jobs SET epoch = 99')", "SELECT"},
		{"a parameter", "SELECT $1", "takes no parameters"},
	}
	before := clitest.CaptureState(t, j.DB)
	files := listFiles(t, j.Dir)
	outsideFiles := listFiles(t, outside)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := clitest.InProcess(t, "query", "--db", j.DB, tc.sql)
			require.Equal(t, report.ExitFailure, code, "stdout: %s\nstderr: %s", stdout, stderr)
			require.Empty(t, stdout)
			require.Contains(t, stderr, tc.want)
			require.Equal(t, files, listFiles(t, j.Dir), "a file changed beside the database")
			require.Equal(t, outsideFiles, listFiles(t, outside), "a file changed outside")
			require.Equal(t, before, clitest.CaptureState(t, j.DB), "a table changed")
		})
	}
}

// What a read-only console is for keeps working.
func TestQueryReads(t *testing.T) {
	t.Parallel()
	j := clitest.AppliedGuardJob(t)
	before := clitest.CaptureState(t, j.DB)
	files := listFiles(t, j.Dir)
	cases := []struct{ sql, want string }{
		{"SELECT count(*) AS rows_now FROM " + clitest.ApplyTable, "rows_now"},
		{"FROM idem.jobs SELECT job, epoch", clitest.ApplyJobName},
		{"WITH x AS (SELECT 41 + 1 AS y) SELECT y FROM x;", "42"},
		{"SELECT 1 AS one; -- a trailing comment", "one"},
		{"DESCRIBE " + clitest.ApplyTable, "column_name"},
		{"SHOW TABLES", clitest.ApplyTable},
		{"SHOW ALL TABLES", "idem_store"},
		{"SUMMARIZE idem.jobs", "column_name"},
		{"PRAGMA table_info('idem.jobs')", "epoch"},
		{"SELECT * FROM pragma_table_info('idem.jobs')", "epoch"},
		{"EXPLAIN SELECT * FROM idem.jobs", "physical_plan"},
		{"SELECT current_setting('enable_external_access') AS ext", "false"},
		{"SELECT * FROM duckdb_settings() WHERE name = 'lock_configuration'", "true"},
		// A checkpoint of a read-only database does nothing.
		{"SELECT * FROM checkpoint()", ""},
		{"SELECT * FROM force_checkpoint()", ""},
	}
	for _, tc := range cases {
		for _, format := range []string{"table", "csv", "json"} {
			code, stdout, stderr := clitest.InProcess(t, "query", "--db", j.DB, "--format", format, tc.sql)
			require.Equal(t, 0, code, "%s (%s): %s", tc.sql, format, stderr)
			require.Contains(t, stdout, tc.want, "%s (%s)", tc.sql, format)
		}
	}
	require.Equal(t, files, listFiles(t, j.Dir))
	require.Equal(t, before, clitest.CaptureState(t, j.DB))
}

// An empty or missing --db fails without creating a file.
func TestQueryNeedsAnExistingDatabase(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing.duckdb")
	code, _, stderr := clitest.InProcess(t, "query", "--db", "", "SELECT 1")
	require.Equal(t, report.ExitUsage, code, stderr)
	require.Contains(t, stderr, "query needs --db PATH")
	code, _, stderr = clitest.InProcess(t, "query", "--db", missing, "SELECT 1")
	require.Equal(t, report.ExitFailure, code, stderr)
	require.Contains(t, stderr, missing)
	require.Contains(t, stderr, "no such file")
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Empty(t, entries, "query created a file")
}

// A read-only open finds the file held by a writer: DuckDB's lock lets no
// reader in, so query exits 4 at once as every command does.
func TestQueryWhileHeld(t *testing.T) {
	t.Parallel()
	j := clitest.AppliedGuardJob(t)
	holder, err := run.Open(context.Background(), j.DB, run.OpenOptions{})
	require.NoError(t, err)
	defer holder.Close()
	p := clitest.StartIdem(t, nil, "query", "--db", j.DB, "SELECT 1")
	require.Equal(t, report.ExitLocked, p.Wait(t, time.Minute), p.Stderr.String())
	require.Contains(t, p.Stderr.String(), "database "+j.DB+" is held by another writer")
}

// typesDB is a database with one row of every DuckDB type idem query
// prints, in table all_types, and an ENUM type.
func typesDB(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "types.duckdb")
	db, err := run.Open(context.Background(), path, run.OpenOptions{})
	require.NoError(t, err)
	_, err = db.SQL().Exec(`CREATE TYPE mood AS ENUM ('sad', 'happy');
CREATE TABLE all_types AS SELECT
  DATE '2001-01-01' AS d,
  TIME '10:00:00' AS tm,
  TIMESTAMP '2001-01-01 10:00:00.5' AS ts,
  TIMESTAMPTZ '2001-01-01 10:00:00+02' AS tstz,
  '2001-01-01 10:00:00.123456789'::TIMESTAMP_NS AS ts_ns,
  '2001-01-01 10:00:00.123'::TIMESTAMP_MS AS ts_ms,
  '2001-01-01 10:00:00'::TIMESTAMP_S AS ts_s,
  123.45::DECIMAL(8,4) AS dec,
  '-12345678901234567890123456.0123456789'::DECIMAL(38,10) AS bigdec,
  170141183460469231731687303715884105727::HUGEINT AS hi,
  18446744073709551615::UBIGINT AS ub,
  INTERVAL '1 year 2 months 3 days 04:05:06' AS iv,
  'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'::UUID AS u,
  '\xAA\xBBz'::BLOB AS bl,
  true AS bo,
  [1, 2, 3] AS li,
  [DATE '2001-01-01', NULL]::DATE[2] AS arr,
  {'a': 1, 'b': 'x y'} AS st,
  MAP {'k': 1, 'j': 2} AS mp,
  'happy'::mood AS en,
  NULL::INTEGER AS nu,
  1.5::DOUBLE AS dbl,
  'inf'::DOUBLE AS inf,
  'it''s, "quoted"' AS s`)
	require.NoError(t, err)
	require.NoError(t, db.Close())
	return path
}

// Every type prints as DuckDB's own CLI prints it, in each format; json
// keeps numbers as exact numbers.
func TestQueryPrintsTypesAsDuckDB(t *testing.T) {
	t.Parallel()
	db := typesDB(t)
	const cols = "d,tm,ts,tstz,ts_ns,ts_ms,ts_s,dec,bigdec,hi,ub,iv,u,bl,bo,li,arr,st,mp,en,nu,dbl,inf,s"
	want := map[string]string{
		"csv": cols + "\n" +
			`2001-01-01,10:00:00,2001-01-01 10:00:00.5,2001-01-01 08:00:00+00,2001-01-01 10:00:00.123456789,` +
			`2001-01-01 10:00:00.123,2001-01-01 10:00:00,123.4500,-12345678901234567890123456.0123456789,` +
			`170141183460469231731687303715884105727,18446744073709551615,1 year 2 months 3 days 04:05:06,` +
			`a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11,\xAA\xBBz,true,"[1, 2, 3]","[2001-01-01, NULL]",` +
			`"{'a': 1, 'b': x y}","{k=1, j=2}",happy,,1.5,inf,"it's, ""quoted"""` + "\n",
		"json": `[{"d":"2001-01-01","tm":"10:00:00","ts":"2001-01-01 10:00:00.5","tstz":"2001-01-01 08:00:00+00",` +
			`"ts_ns":"2001-01-01 10:00:00.123456789","ts_ms":"2001-01-01 10:00:00.123","ts_s":"2001-01-01 10:00:00",` +
			`"dec":123.4500,"bigdec":-12345678901234567890123456.0123456789,"hi":170141183460469231731687303715884105727,` +
			`"ub":18446744073709551615,"iv":"1 year 2 months 3 days 04:05:06","u":"a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11",` +
			`"bl":"\\xAA\\xBBz","bo":true,"li":"[1, 2, 3]","arr":"[2001-01-01, NULL]","st":"{'a': 1, 'b': x y}",` +
			`"mp":"{k=1, j=2}","en":"happy","nu":null,"dbl":1.5,"inf":"inf","s":"it's, \"quoted\""}]` + "\n",
	}
	for _, format := range []string{"csv", "json", "table"} {
		t.Run(format, func(t *testing.T) {
			code, stdout, stderr := clitest.InProcess(t, "query", "--db", db, "--format", format, "SELECT * FROM all_types")
			require.Equal(t, 0, code, stderr)
			if format == "table" {
				lines := strings.Split(stdout, "\n")
				require.Len(t, lines, 4, stdout)
				require.Equal(t, strings.Split(cols, ","), strings.Fields(lines[0]))
				for _, cell := range []string{"2001-01-01  ", "  10:00:00  ", "2001-01-01 10:00:00.5", "123.4500",
					"-12345678901234567890123456.0123456789", "1 year 2 months 3 days 04:05:06", `\xAA\xBBz`,
					"[1, 2, 3]", "{'a': 1, 'b': x y}", "{k=1, j=2}", "  happy  ", "  NULL  ", `it's, "quoted"`} {
					require.Contains(t, lines[1], cell)
				}
				require.NotContains(t, lines[1], "T00:00:00")
				require.Equal(t, "(1 rows)", lines[2])
				return
			}
			require.Equal(t, want[format], stdout)
			if format == "json" {
				dec := json.NewDecoder(strings.NewReader(stdout))
				dec.UseNumber()
				var anyRows []map[string]any
				require.NoError(t, dec.Decode(&anyRows))
				require.Equal(t, json.Number("170141183460469231731687303715884105727"), anyRows[0]["hi"])
				require.Equal(t, json.Number("123.4500"), anyRows[0]["dec"])
			}
		})
	}
}

// Statements DuckDB cannot wrap (PRAGMA, EXPLAIN) are printed by idem from
// the driver's values, in the same notation.
func TestQueryPrintsPragmaAndExplain(t *testing.T) {
	t.Parallel()
	db := typesDB(t)
	code, stdout, stderr := clitest.InProcess(t, "query", "--db", db, "--format", "csv", "PRAGMA table_info('all_types')")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, stdout, "cid,name,type,notnull,dflt_value,pk\n0,d,DATE,false,,false\n")
	code, stdout, stderr = clitest.InProcess(t, "query", "--db", db, "--format", "json", "PRAGMA table_info('all_types')")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, stdout, `{"cid":0,"name":"d","type":"DATE","notnull":false,"dflt_value":null,"pk":false}`)
	code, stdout, stderr = clitest.InProcess(t, "query", "--db", db, "--format", "csv", "EXPLAIN SELECT d FROM all_types")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, stdout, "explain_key,explain_value\nphysical_plan,")
}
