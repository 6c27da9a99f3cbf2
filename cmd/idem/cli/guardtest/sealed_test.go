package guardtest

import (
	"database/sql"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	_ "github.com/duckdb/duckdb-go/v2" // the "duckdb" driver that writes the fixture's parquet and json copies of sec
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idem-dev/idem/cmd/idem/cli/internal/clitest"
	"github.com/idem-dev/idem/internal/lint"
	"github.com/idem-dev/idem/internal/report"
)

// sealedSecret is the value of sec's first row. No job but sec declares
// sec, so no other job may ever see it.
const sealedSecret = "TOPSECRET-7f3a"

// sealedDB is the project database of the sealed fixture, under data/.
const sealedDB = "p"

var sealedFixture clitest.Once[sealedProject]

// sealedProject is the fixture's folder and the state of its database.
type sealedProject struct {
	dir   string
	state clitest.DBState
}

// sealedBase is a project folder built once per package run: database
// data/p.duckdb holding two committed merge_by_key source jobs, pub (id,
// name) and sec (id, value; sealedSecret among its values, in two
// snapshots, so idem."sec__history" holds an older one too), and a
// versioned_changes job vc with an erased key, so idem.erasures holds a
// row. Beside them are copies of sec's rows as parquet and jsonl files in
// input/, which a bypass could read instead of the table.
func sealedBase(t *testing.T) sealedProject {
	t.Helper()
	return sealedFixture.Get(t, func(t *testing.T) sealedProject {
		p := emptyProject(t)
		p.Write("input/pub.csv", "id,name\n1,alpha\n2,beta\n3,gamma\n")
		p.Write("input/sec.csv", "id,value\n1,"+sealedSecret+"\n2,hidden-2\n3,hidden-3\n")
		p.Write("input/sec-2.csv", "id,value\n2,hidden-2b\n")
		p.Source("pub", sealedDB, "input/pub.csv", "id = \"BIGINT\"\nname = \"VARCHAR\"", "id")
		p.Source("sec", sealedDB, "input/sec.csv", "id = \"BIGINT\"\nvalue = \"VARCHAR\"", "id")
		p.Write("vc.toml", `name = "vc"
pipeline = "versioned_changes"
transform_version = 1
schema_version = 1
database = "data/`+sealedDB+`.duckdb"

[input]
path = `+strconv.Quote(clitest.ChangesFixture(t, "batch-1.jsonl"))+`
format = "jsonl"
`+clitest.DuckdbSection)
		for _, args := range [][]string{
			{"run", p.Path("pub.toml")},
			{"run", p.Path("sec.toml")},
			{"run", p.Path("sec.toml"), "--input", p.Path("input/sec-2.csv")},
			{"run", p.Path("vc.toml")},
			{"erase", p.Path("vc.toml"), "--key", "account-1"},
			// A third smaller file, copied for every case.
			{"compact", "--db", p.DB(sealedDB)},
		} {
			r := p.Idem(args...)
			require.Equal(t, 0, r.Code, "%v: %s", args, r.Stderr)
		}
		db, err := sql.Open("duckdb", "")
		require.NoError(t, err)
		defer db.Close()
		src := "read_csv(" + clitest.SQLQuote(p.Path("input/sec.csv")) + ")"
		_, err = db.Exec("COPY (FROM " + src + ") TO " + clitest.SQLQuote(p.Path("input/sec.parquet")) + " (FORMAT parquet);" +
			"COPY (FROM " + src + ") TO " + clitest.SQLQuote(p.Path("input/sec.jsonl")) + " (FORMAT json)")
		require.NoError(t, err)

		state := clitest.CaptureState(t, p.DB(sealedDB))
		require.Contains(t, state[`"main"."sec"`], sealedSecret)
		require.Contains(t, state[`"idem"."sec__history"`], "hidden-2b")
		require.Contains(t, state[`"idem"."erasures"`], "\nvc ", "the erasure of account-1 (kept as its hash)")

		dir := clitest.FixtureDir(t, "sealed")
		clitest.CopyDir(t, p.Dir, dir)
		return sealedProject{dir: dir, state: state}
	})
}

// emptyProject is a new project folder with nothing in it (NewProject
// writes jobs src and zones, which these tests do not use).
func emptyProject(t *testing.T) *clitest.Project {
	t.Helper()
	p := clitest.NewProject(t)
	entries, err := os.ReadDir(p.Dir)
	require.NoError(t, err)
	for _, e := range entries {
		require.NoError(t, os.RemoveAll(filepath.Join(p.Dir, e.Name())))
	}
	return p
}

// sealedPipeline is the refresh pipeline of job w, folder wpipe: it loads
// w's own CSV input (id, name) as is. A case's SQL is its step
// 03_bypass.sql, between the outcomes and the commit steps.
var sealedPipeline = map[string]string{
	"pipeline.toml": `name = "wpipe"
mode = "refresh"
description = "a pipeline whose third step reaches outside its job"
key = ["id"]
columns = [
  { name = "id", type = "BIGINT" },
  { name = "name", type = "VARCHAR" },
]
`,
	"schema/v1.sql": "CREATE OR REPLACE TABLE {{table}} (id BIGINT, name VARCHAR);\n",
	"transform/v1/01_stage.sql": `CREATE OR REPLACE TEMP TABLE staged AS
SELECT row_number() OVER () AS _row, TRY_CAST(id AS BIGINT) AS id, name,
       CASE WHEN TRY_CAST(id AS BIGINT) IS NULL THEN 'invalid_id' END AS reason
FROM input;
`,
	"transform/v1/02_outcomes.sql": `CREATE OR REPLACE TEMP TABLE outcomes AS
SELECT _row, id, name, coalesce(reason, 'accepted') AS outcome FROM staged;
`,
	"transform/v1/04_commit.sql": `DELETE FROM {{table}};
INSERT INTO {{table}} SELECT id, name FROM outcomes WHERE outcome = 'accepted' ORDER BY id, _row;
`,
}

// sealedCase is one way out of a job's declared relations. Its SQL is a
// model (job m, pipeline select, upstream pub) or a step of a pipeline of
// the job's own (job w). "<DIR>" in it is the case's project folder.
type sealedCase struct {
	name  string
	model string // models/m/v1.sql of job m
	step  string // or wpipe/transform/v1/03_bypass.sql of job w
	audit string // or the SQL of a sql audit of job m, whose model stays inside it
	// macros are files of the project's macros folder (name → text), which
	// the model calls.
	macros map[string]string
	// refusedAtLoad: the job file itself is refused (exit 2 from lint
	// too), not a finding of lint's.
	refusedAtLoad bool
	// names is a regular expression (case-insensitive) for the construct
	// that lint's error finding and run's message must name: the table,
	// the function or the statement.
	names string
	// absent is a path under the case's folder that the bypass would
	// create (a file written, a database attached): it must not exist.
	absent string
}

// word is a regular expression for name as a word of its own, in any
// case: sec in "reads table sec", not in sec_active or second.
func word(name string) string { return `(^|[^a-z0-9_])` + name + `([^a-z0-9_]|$)` }

// keyword is word in capitals only, for statements that are also English
// words (USE, SET).
func keyword(name string) string { return `(^|[^a-z0-9_])(?-i:` + name + `)([^a-z0-9_]|$)` }

// idemTable is a regular expression for table idem.name, quoted or not.
func idemTable(name string) string { return word(`"?idem"?\."?` + name + `"?`) }

func sealedCases() []sealedCase {
	return []sealedCase{
		// Reads of a table of the database that is not a declared
		// upstream, however it is spelled or wherever it hides.
		{name: "read idem_store.main.sec", model: "SELECT id, value AS name FROM idem_store.main.sec", names: word("sec")},
		{name: "read main.sec", model: "SELECT id, value AS name FROM main.sec", names: word("sec")},
		{name: "read sec", model: "SELECT id, value AS name FROM sec", names: word("sec")},
		{name: "read SeC in another case", model: "SELECT id, value AS name FROM SeC", names: word("sec")},
		{name: "read pub, the upstream, around {{upstream:pub}}", model: "SELECT id, name FROM main.pub", names: word("pub")},
		{name: "read sec_active, a view of another job", model: "SELECT id, value AS name FROM sec_active", names: word("sec_active")},
		{name: "read pub_outcomes, a companion of the upstream", model: "SELECT DISTINCT id, outcome AS name FROM pub_outcomes", names: word("pub_outcomes")},
		{name: "read sec's history", model: `SELECT id, max(value) AS name FROM idem."sec__history" GROUP BY id`, names: word("sec__history")},
		{name: "read sec's history through the catalog", model: `SELECT id, max(value) AS name FROM idem_store.idem.sec__history GROUP BY id`, names: word("sec__history")},
		{name: "read idem.jobs (job state)", model: "SELECT 1 AS id, job_key AS name FROM idem.jobs WHERE job = 'sec'", names: idemTable("jobs")},
		{name: "read idem.erasures", model: `SELECT 1 AS id, max("key") AS name FROM idem.erasures`, names: idemTable("erasures")},
		{name: "read idem.ledger", model: "SELECT snapshot AS id, digest AS name FROM idem.ledger WHERE job = 'sec'", names: idemTable("ledger")},
		{name: "read idem.runs", model: "SELECT 1 AS id, CAST(count(*) AS VARCHAR) AS name FROM idem.runs", names: idemTable("runs")},
		{name: "read through query() of a built string", model: "SELECT * FROM query('SELECT id, value AS name FROM se' || 'c')", names: word("query")},
		{name: "read through query_table()", model: "SELECT id, value AS name FROM query_table('sec')", names: word("query_table")},
		{name: "a CTE named as the upstream's relation hides sec", model: "WITH idem_upstream_pub AS (SELECT id, value AS name FROM sec)\nSELECT id, name FROM idem_upstream_pub", names: word("sec")},
		{name: "a CTE named pub hides sec", model: "WITH pub AS (SELECT id, value AS name FROM sec)\nSELECT id, name FROM pub", names: word("sec")},
		{name: "sec in a scalar subquery of the SELECT list", model: "SELECT p.id, (SELECT max(value) FROM sec) AS name FROM {{upstream:pub}} AS p", names: word("sec")},
		{name: "sec in WHERE IN (SELECT ...)", model: "SELECT p.id, p.name FROM {{upstream:pub}} AS p\nWHERE p.id IN (SELECT id FROM sec WHERE value LIKE 'TOP%')", names: word("sec")},
		{name: "sec in a LATERAL join", model: "SELECT p.id, s.value AS name FROM {{upstream:pub}} AS p,\nLATERAL (SELECT value FROM sec WHERE sec.id = p.id) AS s", names: word("sec")},
		{name: "sec in a UNION", model: "SELECT id, name FROM {{upstream:pub}}\nUNION ALL SELECT id + 100, value FROM sec", names: word("sec")},

		// Files, through table functions and replacement scans.
		{name: "read_csv of sec's input", model: "SELECT id, value AS name FROM read_csv('<DIR>/input/sec.csv')", names: word("read_csv")},
		{name: "read_parquet", model: "SELECT id, value AS name FROM read_parquet('<DIR>/input/sec.parquet')", names: word("read_parquet")},
		{name: "read_json_auto", model: "SELECT id, value AS name FROM read_json_auto('<DIR>/input/sec.jsonl')", names: word("read_json_auto")},
		{name: "read_text", model: "SELECT 1 AS id, content AS name FROM read_text('/etc/hostname')", names: word("read_text")},
		{name: "read_blob", model: "SELECT 1 AS id, CAST(content AS VARCHAR) AS name FROM read_blob('<DIR>/input/sec.csv')", names: word("read_blob")},
		{name: "glob", model: "SELECT count(*) AS id, max(file) AS name FROM glob('/etc/*')", names: word("glob")},
		{name: "a file as a table: /etc/passwd", model: "SELECT count(*) AS id, 'x' AS name FROM '/etc/passwd'", names: `/etc/passwd`},
		{name: "a file as a table: sec's input", model: "SELECT id, value AS name FROM '<DIR>/input/sec.csv'", names: `sec\.csv`},

		// The catalog, the environment and the settings.
		{name: "duckdb_tables()", model: "SELECT count(*) AS id, max(table_name) AS name FROM duckdb_tables()", names: word("duckdb_tables")},
		{name: "information_schema.tables", model: "SELECT count(*) AS id, max(table_name) AS name FROM information_schema.tables", names: word("information_schema")},
		{name: "getenv", model: "SELECT id, getenv('HOME') AS name FROM {{upstream:pub}}", names: word("getenv")},
		{name: "current_setting", model: "SELECT id, CAST(current_setting('threads') AS VARCHAR) AS name FROM {{upstream:pub}}", names: word("current_setting")},

		// Values that differ on every run.
		{name: "random()", model: "SELECT id, CAST(random() AS VARCHAR) AS name FROM {{upstream:pub}}", names: word("random")},
		{name: "now()", model: "SELECT id, CAST(now() AS VARCHAR) AS name FROM {{upstream:pub}}", names: word("now")},
		{name: "uuid()", model: "SELECT id, CAST(uuid() AS VARCHAR) AS name FROM {{upstream:pub}}", names: word("uuid")},
		{name: "current_timestamp", model: "SELECT id, CAST(current_timestamp AS VARCHAR) AS name FROM {{upstream:pub}}", names: word("current_timestamp")},
		{name: "USING SAMPLE", model: "SELECT id, name FROM {{upstream:pub}} USING SAMPLE 50 PERCENT (bernoulli)", names: word("sample")},

		// Reads of sec in a step, through relations the step makes.
		{name: "step: a temp view over sec, then read", step: "CREATE OR REPLACE TEMP VIEW peek AS SELECT id, value FROM sec;\nUPDATE outcomes SET name = peek.value FROM peek WHERE peek.id = outcomes.id;\n", names: word("sec")},
		{name: "step: a temp table copied from sec", step: "CREATE OR REPLACE TEMP TABLE peek AS SELECT id, value FROM main.sec;\nUPDATE outcomes SET name = peek.value FROM peek WHERE peek.id = outcomes.id;\n", names: word("sec")},
		{name: "step: a temp table macro over sec", step: "CREATE OR REPLACE TEMP MACRO peek() AS TABLE SELECT id, value FROM sec;\nUPDATE outcomes SET name = p.value FROM peek() AS p WHERE p.id = outcomes.id;\n", names: word("sec")},
		{name: "step: a temp scalar macro over sec", step: "CREATE OR REPLACE TEMP MACRO peek(k) AS (SELECT value FROM sec WHERE id = k);\nUPDATE outcomes SET name = peek(id);\n", names: word("sec")},
		{name: "step: UPDATE outcomes FROM sec", step: "UPDATE outcomes SET name = s.value FROM sec AS s WHERE s.id = outcomes.id;\n", names: word("sec")},
		{name: "step: SET VARIABLE from sec", step: "SET VARIABLE leak = (SELECT max(value) FROM sec);\nUPDATE outcomes SET name = getvariable('leak');\n", names: word("sec")},

		// Writes, in a step, to tables that are not the job's.
		{name: "step: UPDATE sec", step: "UPDATE sec SET value = 'PWNED';\n", names: word("sec")},
		{name: "step: INSERT INTO sec", step: "INSERT INTO sec VALUES (9, 'PWNED', 'active');\n", names: word("sec")},
		{name: "step: DELETE FROM sec", step: "DELETE FROM sec;\n", names: word("sec")},
		{name: "step: CREATE OR REPLACE TABLE sec", step: "CREATE OR REPLACE TABLE sec AS SELECT id, name AS value, 'active' AS idem_status FROM outcomes;\n", names: word("sec")},
		{name: "step: DROP TABLE sec", step: "DROP TABLE sec;\n", names: word("sec")},
		{name: "step: ALTER TABLE sec", step: "ALTER TABLE sec ADD COLUMN x INTEGER;\n", names: word("sec")},
		{name: "step: TRUNCATE sec", step: "TRUNCATE sec;\n", names: word("sec")},
		{name: "step: MERGE INTO sec", step: "MERGE INTO sec USING (SELECT 1 AS id) AS d ON sec.id = d.id\nWHEN MATCHED THEN UPDATE SET value = 'PWNED';\n", names: word("sec")},
		{name: "step: UPDATE pub, the upstream of another job", step: "UPDATE pub SET name = 'PWNED';\n", names: word("pub")},
		{name: "step: DELETE FROM sec_outcomes", step: "DELETE FROM sec_outcomes;\n", names: word("sec_outcomes")},
		{name: "step: CREATE TABLE of no job", step: "CREATE TABLE side AS SELECT 1 AS x;\n", names: word("side")},
		{name: "step: CREATE SCHEMA", step: "CREATE SCHEMA evil;\n", names: word("evil") + "|" + word(`CREATE\s+SCHEMA`)},
		{name: "step: DELETE FROM idem.erasures", step: "DELETE FROM idem.erasures;\n", names: idemTable("erasures")},
		{name: "step: UPDATE idem.jobs (job state)", step: "UPDATE idem.jobs SET epoch = 99 WHERE job = 'sec';\n", names: idemTable("jobs")},
		{name: "step: DELETE FROM sec's history", step: "DELETE FROM idem.\"sec__history\";\n", names: word("sec__history")},

		// Statements that reach outside the transaction or the database.
		{name: "step: COPY a query TO a file", step: "COPY (SELECT * FROM outcomes) TO '<DIR>/leak.csv';\n", names: word("COPY"), absent: "leak.csv"},
		{name: "step: COPY sec TO a file", step: "COPY sec TO '<DIR>/leak.csv';\n", names: word("COPY"), absent: "leak.csv"},
		{name: "step: EXPORT DATABASE", step: "EXPORT DATABASE '<DIR>/exported';\n", names: word("EXPORT"), absent: "exported"},
		{name: "step: ATTACH :memory:", step: "ATTACH ':memory:' AS x;\n", names: word("ATTACH")},
		{name: "step: ATTACH a new file", step: "ATTACH '<DIR>/side.duckdb' AS side;\n", names: word("ATTACH"), absent: "side.duckdb"},
		{name: "step: DETACH", step: "DETACH DATABASE IF EXISTS elsewhere;\n", names: word("DETACH")},
		{name: "step: USE", step: "USE memory;\n", names: keyword("USE")},
		{name: "step: SET threads", step: "SET threads = 8;\n", names: keyword("SET")},
		{name: "step: PRAGMA", step: "PRAGMA threads = 8;\n", names: word("PRAGMA")},
		{name: "step: CHECKPOINT", step: "CHECKPOINT;\n", names: word("CHECKPOINT")},
		{name: "step: COMMIT", step: "COMMIT;\n", names: word("COMMIT")},
		{name: "step: SET VARIABLE idem_batch_id", step: "SET VARIABLE idem_batch_id = 'x';\n", names: word("idem_batch_id")},

		// Statements smuggled inside quotes idem's splitter once read
		// otherwise than DuckDB: a dollar-quoted string holding --, an
		// E'' string holding \'. Each is several statements to DuckDB.
		{name: "step: statements after $$--$$", step: "SELECT $$--$$ AS a; UPDATE sec SET value = 'PWNED'; UPDATE idem.jobs SET epoch = 99 WHERE job = 'sec'; COPY (SELECT 1 AS x) TO '<DIR>/leak.csv'; SELECT 1 AS b;\n", names: word("sec"), absent: "leak.csv"},
		{name: "step: statements after $tag$--$tag$", step: "SELECT $q$ -- $q$ AS a; DELETE FROM sec; SELECT 1 AS b;\n", names: word("sec")},
		{name: "step: statements after E'\\''", step: "SELECT E'\\'' AS a; DELETE FROM sec; SELECT 'x' AS b;\n", names: word("sec")},
		{name: "audit: statements after $$--$$", audit: "SELECT $$--$$ AS a; UPDATE sec SET value = 'PWNED'; COPY (SELECT 1 AS x) TO '<DIR>/leak.csv'; SELECT 1 AS b", names: `one SELECT`, absent: "leak.csv", refusedAtLoad: true},
		{name: "model: a second statement after $$;$$", model: "SELECT id, name FROM {{upstream:pub}} WHERE name <> $$x$$) AS m; DELETE FROM sec; SELECT * FROM (SELECT 1", names: word("sec") + `|model|statement`},

		// Names lint and plan once bound otherwise than DuckDB: a CTE read
		// by an earlier sibling is the table of that name; so is a TEMP
		// view once dropped.
		{name: "a CTE reads sec, which only a later sibling names", model: "WITH a AS (SELECT id, value AS name FROM sec), sec AS (SELECT 1 AS id)\nSELECT id, name FROM a", names: word("sec")},
		{name: "step: a TEMP view sec dropped, then sec read", step: "CREATE OR REPLACE TEMP VIEW sec AS SELECT 1 AS id, 'x' AS value;\nDROP VIEW sec;\nUPDATE outcomes SET name = s.value FROM sec AS s WHERE s.id = outcomes.id;\n", names: word("sec")},

		// A refresh job's snapshot is its input's alone: no step reads or
		// keeps the previous target before one empties it.
		{name: "step: the previous target read before the commit empties it", step: "CREATE OR REPLACE TEMP TABLE prev AS SELECT id, name FROM {{table}};\nUPDATE outcomes SET name = prev.name FROM prev WHERE prev.id = outcomes.id;\n", names: "previous snapshot"},

		// Functions that give another value on every run, however named.
		{name: `"random"()`, model: `SELECT id, CAST("random"() AS VARCHAR) AS name FROM {{upstream:pub}}`, names: word("random")},
		{name: `"NOW"()`, model: `SELECT id, CAST("NOW"() AS VARCHAR) AS name FROM {{upstream:pub}}`, names: word("now")},
		{name: "main.random()", model: "SELECT id, CAST(main.random() AS VARCHAR) AS name FROM {{upstream:pub}}", names: word("random")},
		{name: "current_localtimestamp()", model: "SELECT id, CAST(current_localtimestamp() AS VARCHAR) AS name FROM {{upstream:pub}}", names: word("current_localtimestamp")},
		{name: "current_connection_id()", model: "SELECT id, CAST(current_connection_id() AS VARCHAR) AS name FROM {{upstream:pub}}", names: word("current_connection_id")},
		{name: "current_transaction_id()", model: "SELECT id, CAST(current_transaction_id() AS VARCHAR) AS name FROM {{upstream:pub}}", names: word("current_transaction_id")},
		{name: "current_query_id()", model: "SELECT id, CAST(current_query_id() AS VARCHAR) AS name FROM {{upstream:pub}}", names: word("current_query_id")},
		{name: "ago(), a macro over current_timestamp", model: "SELECT id, CAST(ago(INTERVAL 1 DAY) AS VARCHAR) AS name FROM {{upstream:pub}}", names: word("ago")},
		{name: "step: UPDATE ... SET random()", step: "UPDATE outcomes SET name = CAST(random() AS VARCHAR);\n", names: word("random")},
		{name: "version()", model: "SELECT id, version() AS name FROM {{upstream:pub}}", names: word("version")},

		// The catalog's own views, by plain name.
		{name: "pg_class", model: "SELECT count(*) AS id, max(relname) AS name FROM pg_class", names: word("pg_class")},
		{name: "pg_tables", model: "SELECT count(*) AS id, max(tablename) AS name FROM pg_tables", names: word("pg_tables")},
		{name: "sqlite_master", model: "SELECT count(*) AS id, max(sql) AS name FROM sqlite_master", names: word("sqlite_master")},
		{name: "pg_settings", model: "SELECT count(*) AS id, max(setting) AS name FROM pg_settings", names: word("pg_settings")},
		{name: "duckdb_tables, the view", model: "SELECT count(*) AS id, max(table_name) AS name FROM duckdb_tables", names: word("duckdb_tables")},
		{name: "pg_get_viewdef()", model: "SELECT id, pg_get_viewdef(id) AS name FROM {{upstream:pub}}", names: word("pg_get_viewdef")},

		// A macro of the project's macros folder is sealed like the
		// model that calls it, and cannot replace DuckDB's functions.
		{name: "macro: a volatile body", macros: map[string]string{"noise.sql": "CREATE MACRO noise(x) AS x || CAST(random() AS VARCHAR)"},
			model: "SELECT id, noise(name) AS name FROM {{upstream:pub}}", names: word("random")},
		{name: "macro: reads sec in a subquery", macros: map[string]string{"peek.sql": "CREATE MACRO peek(i) AS (SELECT max(value) FROM sec WHERE id = i)"},
			model: "SELECT id, peek(id) AS name FROM {{upstream:pub}}", names: word("sec")},
		{name: "macro: a table macro reads sec", macros: map[string]string{"leak.sql": "CREATE MACRO leak() AS TABLE SELECT id, value AS name FROM sec"},
			model: "SELECT * FROM leak()", names: word("sec")},
		{name: "macro: a table macro reads sec's history", macros: map[string]string{"leak.sql": "CREATE MACRO leak() AS TABLE SELECT id, value AS name FROM idem.\"sec__history\""},
			model: "SELECT * FROM leak()", names: word("sec__history")},
		{name: "macro: a table macro reads a file", macros: map[string]string{"leak.sql": "CREATE MACRO leak() AS TABLE SELECT * FROM read_csv('<DIR>/input/sec.csv')"},
			model: "SELECT id, CAST(value AS VARCHAR) AS name FROM leak()", names: word("read_csv")},
		{name: "macro: $$ hides a second statement", macros: map[string]string{"tag.sql": "CREATE MACRO tag(x) AS x || $$ $$; UPDATE sec SET value = 'PWNED'; SELECT $$ $$"},
			model: "SELECT id, tag(name) AS name FROM {{upstream:pub}}", names: `UPDATE sec|one CREATE MACRO`},
		{name: "macro: a tagged $q$ string around a ;", macros: map[string]string{"tag.sql": "CREATE MACRO tag(x) AS x || $q$ $$; $q$; DROP TABLE sec; -- $q$"},
			model: "SELECT id, tag(name) AS name FROM {{upstream:pub}}", names: `DROP TABLE sec|one CREATE MACRO|statements`},
		{name: "macro: two statements in one file", macros: map[string]string{"two.sql": "CREATE MACRO two(x) AS x;\nCREATE MACRO three(x) AS x"},
			model: "SELECT id, two(name) AS name FROM {{upstream:pub}}", names: `one CREATE MACRO statement`},
		{name: "macro: named like a DuckDB function", macros: map[string]string{"upper.sql": "CREATE MACRO upper(x) AS x || 'PWNED'"},
			model: "SELECT id, upper(name) AS name FROM {{upstream:pub}}", names: `macro upper has the name of a DuckDB function`},
	}
}

// TestSealedSQL: a model or step reads only its declared relations and
// writes only its own tables (README: A chain of jobs; SPEC 10: "A step or
// model reading or writing anything but its declared relations"). Each
// bypass below is an error finding of idem lint (exit 1) naming the
// construct, and idem run and idem plan refuse the job with exit 2 (run
// naming the construct) before anything is written: every table of the
// database holds what it held.
func TestSealedSQL(t *testing.T) {
	t.Parallel()
	cases := sealedCases()
	require.GreaterOrEqual(t, len(cases), 25)
	seen := map[string]bool{}
	for _, tc := range cases {
		require.False(t, seen[tc.name], "two cases named %q", tc.name)
		seen[tc.name] = true
		n := 0
		for _, s := range []string{tc.model, tc.step, tc.audit} {
			if s != "" {
				n++
			}
		}
		require.Equal(t, 1, n, "%s: a model, a step or an audit", tc.name)
	}
	sealedBase(t)
	for i, tc := range cases {
		// Every case is linted; plan and run (a copied database each) go
		// through every other case here, all of them with IDEM_LONG=1.
		full := i%2 == 0 || clitest.LongTests()
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			// The copy's tables are the fixture's: its state, captured
			// once, is the state before (TestSealedControls checks).
			p, before := sealedCopy(t)
			jobFile := writeSealedJob(p, tc)
			names := regexp.MustCompile("(?i)" + tc.names)
			db := p.DB(sealedDB)

			// The case's folder, whose name holds the test's, is left out
			// of what must name the construct.
			idem := func(args ...string) clitest.CLIResult {
				r := p.Idem(args...)
				r.Stdout = strings.ReplaceAll(r.Stdout, p.Dir, "<DIR>")
				r.Stderr = strings.ReplaceAll(r.Stderr, p.Dir, "<DIR>")
				return r
			}

			r := idem("lint", jobFile, "--json")
			if tc.refusedAtLoad {
				assert.Equal(t, report.ExitUsage, r.Code, "lint: exit code; stdout %s stderr %s", r.Stdout, r.Stderr)
				assert.Regexp(t, names, r.Stderr, "lint: stderr does not name /%s/", tc.names)
			} else {
				assert.Equal(t, report.ExitFailure, r.Code, "lint: exit code; stdout %s stderr %s", r.Stdout, r.Stderr)
				var rep lint.Report
				if assert.NoError(t, json.Unmarshal([]byte(r.Stdout), &rep), "lint: --json output %s stderr %s", r.Stdout, r.Stderr) {
					assert.True(t, lintNames(rep, names), "lint: no error finding names /%s/: %s", tc.names, r.Stdout)
				}
			}

			if !full {
				return
			}
			r = idem("plan", jobFile)
			assert.Equal(t, report.ExitUsage, r.Code, "plan: exit code; stdout %s stderr %s", r.Stdout, r.Stderr)
			assert.Empty(t, changedTables(before, clitest.CaptureState(t, db)), "plan: tables changed")

			r = idem("run", jobFile)
			assert.Equal(t, report.ExitUsage, r.Code, "run: exit code; stdout %s stderr %s", r.Stdout, r.Stderr)
			assert.Regexp(t, names, r.Stderr, "run: stderr does not name /%s/", tc.names)
			assert.Empty(t, changedTables(before, clitest.CaptureState(t, db)), "run: tables changed")

			if tc.absent != "" {
				assert.NoFileExists(t, p.Path(tc.absent), "run: the bypass wrote a file")
				assert.NoDirExists(t, p.Path(tc.absent), "run: the bypass wrote a folder")
			}
		})
	}
}

// TestSealedControls: the jobs of TestSealedSQL with SQL that stays inside
// them are clean to lint and run, so a refusal there is the bypass's; and
// a copy of the fixture holds the fixture's state.
func TestSealedControls(t *testing.T) {
	t.Parallel()
	for _, tc := range []sealedCase{
		{name: "model over its upstream", model: "SELECT p.id, upper(p.name) AS name FROM {{upstream:pub}} AS p\nWHERE p.id IN (SELECT id FROM {{upstream:pub}})"},
		{name: "model calling macros", macros: map[string]string{"shout.sql": "CREATE MACRO shout(x) AS upper(x) || '!'", "ids.sql": "CREATE MACRO ids(n) AS TABLE SELECT range AS id FROM range(1, n + 1)"},
			model: "SELECT i.id, shout(p.name) AS name FROM ids(3) AS i JOIN {{upstream:pub}} AS p USING (id)"},
		{name: "step over its own relations", step: "CREATE OR REPLACE TEMP VIEW peek AS SELECT id, upper(name) AS name FROM staged;\nUPDATE outcomes SET name = peek.name FROM peek WHERE peek.id = outcomes.id;\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p, before := sealedCopy(t)
			require.Equal(t, before, clitest.CaptureState(t, p.DB(sealedDB)))
			jobFile := writeSealedJob(p, tc)
			for _, cmd := range []string{"lint", "plan", "run"} {
				r := p.Idem(cmd, jobFile)
				require.Equal(t, 0, r.Code, "%s: stdout %s stderr %s", cmd, r.Stdout, r.Stderr)
			}
		})
	}
}

// sealedCopy is a copy of the sealed fixture in a project folder of the
// test's own, and the state of its database.
func sealedCopy(t *testing.T) (*clitest.Project, clitest.DBState) {
	t.Helper()
	base := sealedBase(t)
	p := emptyProject(t)
	clitest.CopyDir(t, base.dir, p.Dir)
	return p, base.state
}

// changedTables names each table whose rows differ between two states,
// with the first line where they part.
func changedTables(before, after clitest.DBState) []string {
	var out []string
	for name, rows := range before {
		if got, ok := after[name]; !ok {
			out = append(out, name+": gone")
		} else if got != rows {
			out = append(out, name+": "+clitest.FirstDiff(rows, got))
		}
	}
	for name := range after {
		if _, ok := before[name]; !ok {
			out = append(out, name+": new")
		}
	}
	sort.Strings(out)
	return out
}

// writeSealedJob writes the case's job into p: model job m over upstream
// pub, or job w with its own pipeline whose third step is the case's SQL.
// It returns the job file.
func writeSealedJob(p *clitest.Project, tc sealedCase) string {
	expand := func(s string) string { return strings.ReplaceAll(s, "<DIR>", p.Dir) }
	for name, text := range tc.macros {
		p.Write("macros/"+name, expand(text))
	}
	if tc.audit != "" {
		p.Model("m", sealedDB, []string{"pub"}, []string{"id"}, "", "SELECT id, name FROM {{upstream:pub}}\n")
		f, err := os.OpenFile(p.Path("m.toml"), os.O_APPEND|os.O_WRONLY, 0)
		if err == nil {
			_, err = f.WriteString("\n[[audit]]\nname = \"smuggle\"\nkind = \"sql\"\nsql = '''" + expand(tc.audit) + "'''\n")
			err = errors.Join(err, f.Close())
		}
		if err != nil {
			panic(err)
		}
		return p.Path("m.toml")
	}
	if tc.model != "" {
		// pub is declared where the model reads it: a declared upstream
		// the model never reads is refused at load (job.checkDeclaredReads).
		ups := []string{}
		if strings.Contains(tc.model, "{{upstream:pub}}") {
			ups = []string{"pub"}
		}
		p.Model("m", sealedDB, ups, []string{"id"}, "", expand(tc.model)+"\n")
		return p.Path("m.toml")
	}
	for rel, text := range sealedPipeline {
		p.Write("wpipe/"+rel, text)
	}
	p.Write("wpipe/transform/v1/03_bypass.sql", expand(tc.step))
	p.Write("input/w.csv", "id,name\n1,one\n2,two\n")
	p.Write("w.toml", `name = "w"
pipeline = "./wpipe"
transform_version = 1
schema_version = 1
database = "data/`+sealedDB+`.duckdb"

[input]
path = "input/w.csv"
format = "csv"
`+clitest.DuckdbSection)
	return p.Path("w.toml")
}

// lintNames reports whether an error finding of rep names the construct.
func lintNames(rep lint.Report, names *regexp.Regexp) bool {
	for _, f := range rep.Findings {
		if f.Severity == "error" && names.MatchString(f.Message) {
			return true
		}
	}
	return false
}
