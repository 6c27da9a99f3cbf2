package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idem-dev/idem/internal/job"
)

// testProject is a project folder: job files, their models and inputs, and
// the databases they name under data/.
type testProject struct {
	t   *testing.T
	dir string
}

// newProject writes a project of two source jobs in database data/p.duckdb:
// src (sales by id: day, zone, amount) and zones (zone names), each
// merge_by_key from a CSV file of input/.
func newProject(t *testing.T) *testProject {
	t.Helper()
	p := &testProject{t: t, dir: t.TempDir()}
	p.write("input/src.csv", "id,day,zone,amount\n1,2024-01-01,1,10.00\n2,2024-01-01,2,5.50\n3,2024-01-02,1,7.25\n")
	p.write("input/zones.csv", "zone_id,zone\n1,north\n2,south\n")
	p.source("src", "p", "input/src.csv", `id = "BIGINT"
day = "DATE"
zone = "INTEGER"
amount = "DECIMAL(10,2)"`, "id")
	p.source("zones", "p", "input/zones.csv", `zone_id = "INTEGER"
zone = "VARCHAR"`, "zone_id")
	return p
}

func (p *testProject) write(rel, text string) {
	p.t.Helper()
	writeFile(p.t, filepath.Join(p.dir, rel), text)
}

func (p *testProject) path(rel string) string { return filepath.Join(p.dir, rel) }

// db is the path of database data/NAME.duckdb.
func (p *testProject) db(name string) string { return p.path("data/" + name + ".duckdb") }

// source writes job NAME.toml: merge_by_key of input, in database db.
func (p *testProject) source(name, db, input, columns, key string) {
	p.t.Helper()
	p.write(name+".toml", fmt.Sprintf(`name = %q
pipeline = "merge_by_key"
transform_version = 1
schema_version = 1
database = "data/%s.duckdb"

[input]
path = %q

[input.columns]
%s

[target]
key = [%q]
`+duckdbSection, name, db, input, columns, key))
}

// model writes job NAME.toml (pipeline = "select") in database db, reading
// upstream, with key key and table table ("" for the job's name), and its
// model models/NAME/v1.sql.
func (p *testProject) model(name, db string, upstream, key []string, table, sql string) {
	p.t.Helper()
	q := func(s []string) string {
		b, _ := json.Marshal(s)
		return string(b)
	}
	target := ""
	if table != "" {
		target = fmt.Sprintf("table = %q\n", table)
	}
	p.write(name+".toml", fmt.Sprintf(`name = %q
pipeline = "select"
transform_version = 1
database = "data/%s.duckdb"

[input]
upstream = %s

[transform]
sql = "models/%s"

[target]
%skey = %s
`+duckdbSection, name, db, q(upstream), name, target, q(key)))
	p.write("models/"+name+"/v1.sql", sql)
}

// idem runs the CLI in-process.
func (p *testProject) idem(args ...string) cliResult {
	p.t.Helper()
	return callIdem(p.t, args...)
}

const dailyModel = `SELECT day, count(*) AS sales, sum(amount) AS amount
FROM {{upstream:src}}
WHERE idem_status = 'active'
GROUP BY day
`

// TestProjectUndeclaredRead: a model that reads table zones of its
// database directly instead of {{upstream:zones}} is lint error L009, and
// run and plan refuse it with exit 2 before anything is written: the run
// log records it as failed.
func TestProjectUndeclaredRead(t *testing.T) {
	t.Parallel()
	p := newProject(t)
	p.model("named", "p", []string{"src"}, []string{"day", "zone"}, "", `SELECT s.day, z.zone, count(*) AS sales
FROM {{upstream:src}} AS s
JOIN zones AS z ON z.zone_id = s.zone
GROUP BY ALL
`)
	for _, j := range []string{"src.toml", "zones.toml"} {
		r := p.idem("run", p.path(j))
		require.Equal(t, 0, r.code, r.stderr)
	}

	r := p.idem("lint", p.path("named.toml"))
	require.Equal(t, 1, r.code, r.stdout+r.stderr)
	require.Contains(t, r.stdout, "L009")
	require.Contains(t, r.stdout, "models/named/v1.sql:1")
	require.Contains(t, r.stdout, "v1.sql reads table zones, which is not a declared upstream")
	require.Contains(t, r.stdout, "declare it in [input] upstream and read it as {{upstream:zones}}")

	want := "step 01_model.sql reads table zones of the database, which is not a declared upstream: declare it in [input] upstream and read it as {{upstream:zones}}"
	before := captureState(t, p.db("p"))
	for _, cmd := range []string{"run", "plan"} {
		r = p.idem(cmd, p.path("named.toml"))
		require.Equal(t, job.ExitUsage, r.code, "%s: %s %s", cmd, r.stdout, r.stderr)
		require.Contains(t, r.stderr, want, cmd)
		require.Equal(t, before, captureState(t, p.db("p")), cmd)
	}
	require.Equal(t, []string{"failed"}, queryStrs(t, p.db("p"), `SELECT decision FROM idem.runs WHERE job = 'named'`))

	// Declared and read as an upstream, the same model runs.
	p.model("named", "p", []string{"src", "zones"}, []string{"day", "zone"}, "", `SELECT s.day, z.zone, count(*) AS sales
FROM {{upstream:src}} AS s
JOIN {{upstream:zones}} AS z ON z.zone_id = s.zone
WHERE s.idem_status = 'active' AND z.idem_status = 'active'
GROUP BY ALL
`)
	r = p.idem("lint", p.path("named.toml"))
	require.Equal(t, 0, r.code, r.stdout+r.stderr)
	r = p.idem("run", p.path("named.toml"))
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, []int64{3}, queryInts(t, p.db("p"), `SELECT count(*) FROM named`))
}

// TestProjectOwnership: a model whose target is another job's target or
// companion in the same database is refused with exit 3 naming the owner,
// as a job of a project run and alone, and nothing changes.
func TestProjectOwnership(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ table, owned string }{
		{"src", `table "src" belongs to job "src"`},
		{"src_outcomes", `table "src_outcomes" belongs to job "src"`},
		{"zones_active", `table "zones_active" belongs to job "zones"`},
	} {
		t.Run(tc.table, func(t *testing.T) {
			t.Parallel()
			p := newProject(t)
			r := p.idem("run", p.dir)
			require.Equal(t, 0, r.code, r.stderr)
			p.model("thief", "p", []string{"src"}, []string{"day"}, tc.table, dailyModel)
			before := captureState(t, p.db("p"))
			r = p.idem("run", p.path("thief.toml"))
			require.Equal(t, job.ExitRefused, r.code, r.stdout+r.stderr)
			require.Contains(t, r.stderr, tc.owned+`; job "thief" may not create or write it`)
			require.Equal(t, before, captureState(t, p.db("p")))

			r = p.idem("run", p.dir, "--json")
			require.Equal(t, job.ExitRefused, r.code, r.stdout+r.stderr)
			objs := projectObjects(t, r.stdout)
			require.Equal(t, "refused", objs["thief"]["decision"])
			require.Contains(t, objs["thief"]["error"], tc.owned)
			require.Equal(t, before, captureState(t, p.db("p")))
			require.Empty(t, queryStrs(t, p.db("p"), `SELECT job FROM idem.jobs WHERE job = 'thief'`))
		})
	}
}

// projectObjects decodes a project's --json array by job name, and checks
// that every job appears once.
func projectObjects(t *testing.T, stdout string) map[string]map[string]any {
	t.Helper()
	var arr []map[string]any
	require.NoError(t, json.Unmarshal([]byte(stdout), &arr), stdout)
	out := map[string]map[string]any{}
	for _, o := range arr {
		name, _ := o["job"].(string)
		require.NotContains(t, out, name, stdout)
		out[name] = o
	}
	return out
}

// projectOrder lists the jobs of a project's --json array in order.
func projectOrder(t *testing.T, stdout string) []string {
	t.Helper()
	var arr []map[string]any
	require.NoError(t, json.Unmarshal([]byte(stdout), &arr), stdout)
	var out []string
	for _, o := range arr {
		out = append(out, fmt.Sprintf("%v %v", o["job"], o["decision"]))
	}
	return out
}

// TestProjectCycle: two models that read each other are exit 2 naming the
// cycle, for run and plan, before any database is created.
func TestProjectCycle(t *testing.T) {
	t.Parallel()
	p := newProject(t)
	p.model("a", "p", []string{"b"}, []string{"day"}, "", "SELECT day FROM {{upstream:b}}\n")
	p.model("b", "p", []string{"a"}, []string{"day"}, "", "SELECT day FROM {{upstream:a}}\n")
	for _, cmd := range []string{"run", "plan"} {
		r := p.idem(cmd, p.dir)
		require.Equal(t, job.ExitUsage, r.code, r.stdout+r.stderr)
		require.Contains(t, r.stderr, "upstream references form a cycle: a → b → a")
		require.Empty(t, r.stdout)
		require.NoFileExists(t, p.db("p"), "nothing is written, not even the database")
		require.NoDirExists(t, p.path("data"))
	}
}

// TestProjectBlockedDownstream: a job downstream of one that failed (exit
// 1) or was refused (exit 3) is reported blocked and not run, an
// independent job still runs, and the exit code is the worst met.
func TestProjectBlockedDownstream(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		table string // the broken job's [target] table
		model string // its SELECT
		code  int
		want  string // in the broken job's message
		dec   string
	}{
		{"failed", "", "SELECT day, no_such_column FROM {{upstream:src}}\n", job.ExitFailure, "no_such_column", "failed"},
		{"refused", "zones", dailyModel, job.ExitRefused, `table "zones" belongs to job "zones"`, "refused"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := newProject(t)
			// zones runs first and alone: the refused case needs its owner.
			r := p.idem("run", p.path("zones.toml"))
			require.Equal(t, 0, r.code, r.stderr)
			p.model("broken", "p", []string{"src"}, []string{"day"}, tc.table, tc.model)
			p.model("after", "p", []string{"broken"}, []string{"day"}, "", "SELECT day, count(*) AS n FROM {{upstream:broken}} GROUP BY day\n")
			p.model("daily", "p", []string{"src"}, []string{"day"}, "", dailyModel)

			r = p.idem("run", p.dir)
			require.Equal(t, tc.code, r.code, r.stdout+r.stderr)
			require.Contains(t, r.stdout, "after: blocked by broken (not run)\n")
			require.Contains(t, r.stderr, tc.want)
			require.Equal(t, []string{"daily", "src", "zones"}, queryStrs(t, p.db("p"), `SELECT job FROM idem.jobs ORDER BY job`),
				"the independent jobs ran, the blocked one has no state row")

			// Again with --json: one object per job in run order.
			before := captureState(t, p.db("p"))
			r = p.idem("run", p.dir, "--json")
			require.Equal(t, tc.code, r.code, r.stdout+r.stderr)
			objs := projectObjects(t, r.stdout)
			require.Equal(t, map[string]any{"job": "after", "decision": "blocked", "blocked_by": []any{"broken"}}, objs["after"])
			require.Equal(t, tc.dec, objs["broken"]["decision"])
			require.Equal(t, float64(tc.code), objs["broken"]["exit_code"])
			require.Contains(t, objs["broken"]["error"], tc.want)
			require.Equal(t, "skipped", objs["daily"]["decision"])
			require.Equal(t, before, captureState(t, p.db("p")))
			order := projectOrder(t, r.stdout)
			require.Less(t, slices.Index(order, "src already_committed"), slices.Index(order, "broken "+tc.dec), order)
			require.Less(t, slices.Index(order, "broken "+tc.dec), slices.Index(order, "after blocked"), order)
		})
	}
}

// TestProjectModelKey: a model whose result has a duplicate or NULL key
// fails with exit 1 naming up to three offending keys, and commits
// nothing.
func TestProjectModelKey(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, model, want string }{
		{"duplicates", "SELECT ('d' || (t.i % 5)) AS day, s.zone\nFROM {{upstream:src}} AS s CROSS JOIN range(10) AS t(i)\nWHERE s.id = 1\n",
			"model keyed: key (day, zone) must be unique and not NULL: (d0, 1) 2 rows; (d1, 1) 2 rows; (d2, 1) 2 rows, ...; nothing committed"},
		{"one duplicate", "SELECT s.day, 1 AS zone FROM {{upstream:src}} AS s\n",
			"model keyed: key (day, zone) must be unique and not NULL: (2024-01-01, 1) 2 rows; nothing committed"},
		{"null", "SELECT CASE WHEN s.id = 3 THEN NULL ELSE s.day END AS day, s.zone FROM {{upstream:src}} AS s\n",
			"model keyed: key (day, zone) must be unique and not NULL: (NULL, 1) has a NULL; nothing committed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := newProject(t)
			r := p.idem("run", p.path("src.toml"))
			require.Equal(t, 0, r.code, r.stderr)
			p.model("keyed", "p", []string{"src"}, []string{"day", "zone"}, "", tc.model)
			before := captureState(t, p.db("p"))
			r = p.idem("run", p.path("keyed.toml"))
			require.Equal(t, job.ExitFailure, r.code, r.stdout+r.stderr)
			require.Contains(t, r.stderr, tc.want)
			require.Equal(t, before, captureState(t, p.db("p")))
			require.Equal(t, []int64{0}, queryInts(t, p.db("p"), `SELECT count(*) FROM duckdb_tables() WHERE table_name = 'keyed'`))
		})
	}
}

// TestProjectUsage: a --select naming no job, and a one-job flag given
// with a project, are exit 2 before anything runs.
func TestProjectUsage(t *testing.T) {
	t.Parallel()
	p := newProject(t)
	p.model("daily", "p", []string{"src"}, []string{"day"}, "", dailyModel)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"run", p.dir, "--select", "nope"}, "--select nope: no job named nope in the project (jobs: daily, src, zones)"},
		{[]string{"plan", p.dir, "--select", "nope+"}, "--select nope+: no job named nope"},
		{[]string{"run", p.dir, "--input", p.path("input/src.csv")}, "--input names one batch of one job: give one job file, not a project"},
		{[]string{"run", p.path("src.toml"), p.path("daily.toml"), "--batch-id", "x"}, "--batch-id names one batch of one job"},
	} {
		r := p.idem(tc.args...)
		require.Equal(t, job.ExitUsage, r.code, "%v: %s %s", tc.args, r.stdout, r.stderr)
		require.Contains(t, r.stderr, tc.want, tc.args)
		require.NoDirExists(t, p.path("data"), tc.args)
	}
}

// TestProjectJobsConcurrent: --jobs 2 over a project of two databases
// prints the same array, in the same order, as --jobs 1 on a fresh copy,
// and both commit the same rows.
func TestProjectJobsConcurrent(t *testing.T) {
	t.Parallel()
	p := newProject(t)
	p.model("daily", "p", []string{"src"}, []string{"day"}, "", dailyModel)
	// A second database: its own source and model.
	p.source("other", "q", "input/src.csv", "id = \"BIGINT\"\nday = \"DATE\"\nzone = \"INTEGER\"\namount = \"DECIMAL(10,2)\"", "id")
	p.model("other_daily", "q", []string{"other"}, []string{"day"}, "", strings.ReplaceAll(dailyModel, "upstream:src", "upstream:other"))

	outs := map[int]string{}
	rows := map[int][]string{}
	for _, n := range []int{1, 2} {
		require.NoError(t, os.RemoveAll(p.path("data")))
		r := p.idem("run", p.dir, "--json", "--jobs", fmt.Sprint(n))
		require.Equal(t, 0, r.code, r.stderr)
		outs[n] = r.stdout
		rows[n] = append(queryStrs(t, p.db("p"), `SELECT day || ' ' || sales || ' ' || amount FROM daily ORDER BY day`),
			queryStrs(t, p.db("q"), `SELECT day || ' ' || sales || ' ' || amount FROM other_daily ORDER BY day`)...)
	}
	require.Len(t, projectObjects(t, outs[1]), 5)
	require.Equal(t, []string{"daily loaded", "other applied", "other_daily loaded", "src applied", "zones applied"},
		func() []string { o := projectOrder(t, outs[1]); slices.Sort(o); return o }())
	require.JSONEq(t, outs[1], outs[2])
	require.Equal(t, rows[1], rows[2])
	require.Equal(t, []string{"2024-01-01 2 15.50", "2024-01-02 1 7.25", "2024-01-01 2 15.50", "2024-01-02 1 7.25"}, rows[1])
}
