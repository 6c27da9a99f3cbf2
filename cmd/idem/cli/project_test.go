package cli

import (
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idem-dev/idem/cmd/idem/cli/internal/clitest"
	"github.com/idem-dev/idem/internal/report"
)

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
	p := clitest.NewProject(t)
	p.Model("named", "p", []string{"src"}, []string{"day", "zone"}, "", `SELECT s.day, z.zone, count(*) AS sales
FROM {{upstream:src}} AS s
JOIN zones AS z ON z.zone_id = s.zone
GROUP BY ALL
`)
	for _, j := range []string{"src.toml", "zones.toml"} {
		r := p.Idem("run", p.Path(j))
		require.Equal(t, 0, r.Code, r.Stderr)
	}

	r := p.Idem("lint", p.Path("named.toml"))
	require.Equal(t, 1, r.Code, r.Stdout+r.Stderr)
	require.Contains(t, r.Stdout, "L009")
	require.Contains(t, r.Stdout, "models/named/v1.sql:3")
	require.Contains(t, r.Stdout, "v1.sql reads table zones, which is not a declared upstream")
	require.Contains(t, r.Stdout, "declare it in [input] upstream and read it as {{upstream:zones}}")

	want := "models/named/v1.sql line 3: reads table zones of the database, which is not a declared upstream: declare it in [input] upstream and read it as {{upstream:zones}}"
	before := clitest.CaptureState(t, p.DB("p"))
	for _, cmd := range []string{"run", "plan"} {
		r = p.Idem(cmd, p.Path("named.toml"))
		require.Equal(t, report.ExitUsage, r.Code, "%s: %s %s", cmd, r.Stdout, r.Stderr)
		require.Contains(t, r.Stderr, want, cmd)
		require.Equal(t, before, clitest.CaptureState(t, p.DB("p")), cmd)
	}
	require.Equal(t, []string{"failed"}, clitest.QueryStrs(t, p.DB("p"), `SELECT decision FROM idem.runs WHERE job = 'named'`))

	// Declared and read as an upstream, the same model runs.
	p.Model("named", "p", []string{"src", "zones"}, []string{"day", "zone"}, "", `SELECT s.day, z.zone, count(*) AS sales
FROM {{upstream:src}} AS s
JOIN {{upstream:zones}} AS z ON z.zone_id = s.zone
WHERE s.idem_status = 'active' AND z.idem_status = 'active'
GROUP BY ALL
`)
	r = p.Idem("lint", p.Path("named.toml"))
	require.Equal(t, 0, r.Code, r.Stdout+r.Stderr)
	r = p.Idem("run", p.Path("named.toml"))
	require.Equal(t, 0, r.Code, r.Stderr)
	require.Equal(t, []int64{3}, clitest.QueryInts(t, p.DB("p"), `SELECT count(*) FROM named`))
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
			p := clitest.NewProject(t)
			r := p.Idem("run", p.Dir)
			require.Equal(t, 0, r.Code, r.Stderr)
			p.Model("thief", "p", []string{"src"}, []string{"day"}, tc.table, dailyModel)
			before := clitest.CaptureState(t, p.DB("p"))
			r = p.Idem("run", p.Path("thief.toml"))
			require.Equal(t, report.ExitRefused, r.Code, r.Stdout+r.Stderr)
			require.Contains(t, r.Stderr, tc.owned+`; job "thief" may not create or write it`)
			require.Equal(t, before, clitest.CaptureState(t, p.DB("p")))

			r = p.Idem("run", p.Dir, "--json")
			require.Equal(t, report.ExitRefused, r.Code, r.Stdout+r.Stderr)
			objs := projectObjects(t, r.Stdout)
			require.Equal(t, "refused", objs["thief"]["decision"])
			require.Contains(t, objs["thief"]["error"], tc.owned)
			require.Equal(t, before, clitest.CaptureState(t, p.DB("p")))
			require.Empty(t, clitest.QueryStrs(t, p.DB("p"), `SELECT job FROM idem.jobs WHERE job = 'thief'`))
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
	p := clitest.NewProject(t)
	p.Model("a", "p", []string{"b"}, []string{"day"}, "", "SELECT day FROM {{upstream:b}}\n")
	p.Model("b", "p", []string{"a"}, []string{"day"}, "", "SELECT day FROM {{upstream:a}}\n")
	for _, cmd := range []string{"run", "plan"} {
		r := p.Idem(cmd, p.Dir)
		require.Equal(t, report.ExitUsage, r.Code, r.Stdout+r.Stderr)
		require.Contains(t, r.Stderr, "upstream references form a cycle: a → b → a")
		require.Empty(t, r.Stdout)
		require.NoFileExists(t, p.DB("p"), "nothing is written, not even the database")
		require.NoDirExists(t, p.Path("data"))
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
		{"failed", "", "SELECT day, no_such_column FROM {{upstream:src}}\n", report.ExitFailure, "no_such_column", "failed"},
		{"refused", "zones", dailyModel, report.ExitRefused, `table "zones" belongs to job "zones"`, "refused"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := clitest.NewProject(t)
			// zones runs first and alone: the refused case needs its owner.
			r := p.Idem("run", p.Path("zones.toml"))
			require.Equal(t, 0, r.Code, r.Stderr)
			p.Model("broken", "p", []string{"src"}, []string{"day"}, tc.table, tc.model)
			p.Model("after", "p", []string{"broken"}, []string{"day"}, "", "SELECT day, count(*) AS n FROM {{upstream:broken}} GROUP BY day\n")
			p.Model("daily", "p", []string{"src"}, []string{"day"}, "", dailyModel)

			r = p.Idem("run", p.Dir)
			require.Equal(t, tc.code, r.Code, r.Stdout+r.Stderr)
			require.Contains(t, r.Stdout, "after: blocked by broken (not run)\n")
			require.Contains(t, r.Stderr, tc.want)
			require.Equal(t, []string{"daily", "src", "zones"}, clitest.QueryStrs(t, p.DB("p"), `SELECT job FROM idem.jobs ORDER BY job`),
				"the independent jobs ran, the blocked one has no state row")

			// Again with --json: one object per job in run order.
			before := clitest.CaptureState(t, p.DB("p"))
			r = p.Idem("run", p.Dir, "--json")
			require.Equal(t, tc.code, r.Code, r.Stdout+r.Stderr)
			objs := projectObjects(t, r.Stdout)
			require.Equal(t, map[string]any{"job": "after", "decision": "blocked", "blocked_by": []any{"broken"}}, objs["after"])
			require.Equal(t, tc.dec, objs["broken"]["decision"])
			require.Equal(t, float64(tc.code), objs["broken"]["exit_code"])
			require.Contains(t, objs["broken"]["error"], tc.want)
			require.Equal(t, "skipped", objs["daily"]["decision"])
			require.Equal(t, before, clitest.CaptureState(t, p.DB("p")))
			order := projectOrder(t, r.Stdout)
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
			p := clitest.NewProject(t)
			r := p.Idem("run", p.Path("src.toml"))
			require.Equal(t, 0, r.Code, r.Stderr)
			p.Model("keyed", "p", []string{"src"}, []string{"day", "zone"}, "", tc.model)
			before := clitest.CaptureState(t, p.DB("p"))
			r = p.Idem("run", p.Path("keyed.toml"))
			require.Equal(t, report.ExitFailure, r.Code, r.Stdout+r.Stderr)
			require.Contains(t, r.Stderr, tc.want)
			require.Equal(t, before, clitest.CaptureState(t, p.DB("p")))
			require.Equal(t, []int64{0}, clitest.QueryInts(t, p.DB("p"), `SELECT count(*) FROM duckdb_tables() WHERE table_name = 'keyed'`))
		})
	}
}

// TestProjectUsage: a --select naming no job, and a one-job flag given
// with a project, are exit 2 before anything runs.
func TestProjectUsage(t *testing.T) {
	t.Parallel()
	p := clitest.NewProject(t)
	p.Model("daily", "p", []string{"src"}, []string{"day"}, "", dailyModel)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"run", p.Dir, "--select", "nope"}, "--select nope: no job named nope in the project (jobs: daily, src, zones)"},
		{[]string{"plan", p.Dir, "--select", "nope+"}, "--select nope+: no job named nope"},
		{[]string{"run", p.Dir, "--input", p.Path("input/src.csv")}, "--input names one batch of one job: give one job file, not a project"},
		{[]string{"run", p.Path("src.toml"), p.Path("daily.toml"), "--batch-id", "x"}, "--batch-id names one batch of one job"},
	} {
		r := p.Idem(tc.args...)
		require.Equal(t, report.ExitUsage, r.Code, "%v: %s %s", tc.args, r.Stdout, r.Stderr)
		require.Contains(t, r.Stderr, tc.want, tc.args)
		require.NoDirExists(t, p.Path("data"), tc.args)
	}
}

// TestProjectJobsConcurrent: --jobs 2 over a project of two databases
// prints the same array, in the same order, as --jobs 1 on a fresh copy,
// and both commit the same rows.
func TestProjectJobsConcurrent(t *testing.T) {
	t.Parallel()
	p := clitest.NewProject(t)
	p.Model("daily", "p", []string{"src"}, []string{"day"}, "", dailyModel)
	// A second database: its own source and model.
	p.Source("other", "q", "input/src.csv", "id = \"BIGINT\"\nday = \"DATE\"\nzone = \"INTEGER\"\namount = \"DECIMAL(10,2)\"", "id")
	p.Model("other_daily", "q", []string{"other"}, []string{"day"}, "", strings.ReplaceAll(dailyModel, "upstream:src", "upstream:other"))

	outs := map[int]string{}
	rows := map[int][]string{}
	for _, n := range []int{1, 2} {
		require.NoError(t, os.RemoveAll(p.Path("data")))
		r := p.Idem("run", p.Dir, "--json", "--jobs", fmt.Sprint(n))
		require.Equal(t, 0, r.Code, r.Stderr)
		outs[n] = r.Stdout
		rows[n] = append(clitest.QueryStrs(t, p.DB("p"), `SELECT day || ' ' || sales || ' ' || amount FROM daily ORDER BY day`),
			clitest.QueryStrs(t, p.DB("q"), `SELECT day || ' ' || sales || ' ' || amount FROM other_daily ORDER BY day`)...)
	}
	require.Len(t, projectObjects(t, outs[1]), 5)
	require.Equal(t, []string{"daily loaded", "other applied", "other_daily loaded", "src applied", "zones applied"},
		func() []string { o := projectOrder(t, outs[1]); slices.Sort(o); return o }())
	require.JSONEq(t, outs[1], outs[2])
	require.Equal(t, rows[1], rows[2])
	require.Equal(t, []string{"2024-01-01 2 15.50", "2024-01-02 1 7.25", "2024-01-01 2 15.50", "2024-01-02 1 7.25"}, rows[1])
}

// TestProjectSelectors: --select tag:, path: and state:modified with +,
// through run and plan: state:modified picks the model edited in place and
// + its downstream, and nothing once it has run.
func TestProjectSelectors(t *testing.T) {
	t.Parallel()
	p := clitest.NewProject(t)
	p.Model("daily", "p", []string{"src"}, []string{"day"}, "", "SELECT day, sum(amount) AS total FROM {{upstream:src}} GROUP BY day")
	p.Model("best", "p", []string{"daily"}, []string{"total"}, "", "SELECT max(total) AS total FROM {{upstream:daily}}")
	p.Write("daily.toml", strings.Replace(readText(t, p.Path("daily.toml")), `pipeline = "select"`, "pipeline = \"select\"\ntags = [\"mart\"]", 1))

	r := p.Idem("run", p.Dir, "--select", "+tag:mart")
	require.Equal(t, 0, r.Code, r.Stderr)
	require.Equal(t, []string{"daily", "src"}, clitest.QueryStrs(t, p.DB("p"), `SELECT job FROM idem.jobs ORDER BY job`))
	r = p.Idem("run", p.Dir, "--select", "path:"+p.Path("best.toml"), "--select", "zones")
	require.Equal(t, 0, r.Code, r.Stderr)
	require.Contains(t, r.Stdout, "best: loaded (first load)")

	r = p.Idem("plan", p.Dir, "--select", "state:modified+")
	require.Equal(t, 0, r.Code, r.Stderr)
	require.Empty(t, r.Stdout)
	require.Equal(t, "idem: --select state:modified+ picks no job: nothing to do\n", r.Stderr)

	p.Write("models/daily/v2.sql", "SELECT day, sum(amount) * 2 AS total FROM {{upstream:src}} GROUP BY day")
	p.Write("daily.toml", strings.Replace(readText(t, p.Path("daily.toml")), "transform_version = 1", "transform_version = 2", 1))
	r = p.Idem("plan", p.Dir, "--select", "state:modified+")
	require.Equal(t, 0, r.Code, r.Stderr)
	require.Contains(t, r.Stdout, "daily: would be loaded [transform changed]")
	require.Contains(t, r.Stdout, "best: would be loaded [input changed]")
	require.NotContains(t, r.Stdout, "src:")

	r = p.Idem("run", p.Dir, "--select", "tag:nightly")
	require.Equal(t, report.ExitUsage, r.Code)
	require.Contains(t, r.Stderr, "--select tag:nightly: no job of the project has tag nightly (tags: mart)")
}

// readText reads a file of a test, requiring success.
func readText(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	return string(data)
}

// TestJobByName: inside a project folder, commands take a job's name for
// its job file; -v names the TOML files that are not job files.
func TestJobByName(t *testing.T) {
	t.Parallel()
	p := clitest.NewProject(t)
	p.Write("sqlfluff.toml", "[sqlfluff]\ndialect = \"duckdb\"\n")
	r := clitest.RunCLI(t, p.Dir, "", "run", ".", "-v", "-q")
	require.Equal(t, 0, r.Code, r.Stderr)
	require.Empty(t, r.Stdout)
	require.Equal(t, "idem: sqlfluff.toml is not a job file (no top-level pipeline =): not read\n", r.Stderr)
	for _, args := range [][]string{{"show", "src"}, {"log", "src"}, {"diff", "src", "--from", "1", "--to", "1"}, {"export", "src", "--out", "src.csv"}} {
		r = clitest.RunCLI(t, p.Dir, "", args...)
		require.Equal(t, 0, r.Code, "%v: %s", args, r.Stderr)
		require.NotEmpty(t, r.Stdout, args)
	}
	r = clitest.RunCLI(t, p.Dir, "", "show", "nope")
	require.Equal(t, report.ExitUsage, r.Code)
	require.Equal(t, "idem: no job file nope, and no job named nope among the job files of this folder: give a job file's path\n", r.Stderr)
}

// TestProjectDiamondParallel: a diamond (src, two models reading it, one
// reading both) beside an independent source runs with --jobs 1 and
// --jobs 4 on fresh databases to the same printed output and the same
// rows; a failing branch blocks the bottom of the diamond only, printed
// the same way whatever the jobs.
func TestProjectDiamondParallel(t *testing.T) {
	t.Parallel()
	p := clitest.NewProject(t)
	p.Model("left", "p", []string{"src"}, []string{"day"}, "", dailyModel)
	p.Model("right", "p", []string{"src"}, []string{"zone"}, "", "SELECT zone, count(*) AS n, sum(amount) AS amount FROM {{upstream:src}} WHERE idem_status = 'active' GROUP BY zone\n")
	p.Model("bottom", "p", []string{"left", "right"}, []string{"day", "zone"}, "",
		"SELECT l.day, r.zone, l.sales * r.n AS x, l.amount + r.amount AS amount FROM {{upstream:left}} AS l CROSS JOIN {{upstream:right}} AS r\n")
	rows := func() []string {
		var out []string
		for _, m := range []string{"left", "right", "bottom"} {
			out = append(out, clitest.QueryStrs(t, p.DB("p"), `SELECT '`+m+`: ' || string_agg(CAST(t AS VARCHAR), '; ' ORDER BY CAST(t AS VARCHAR)) FROM "`+m+`" AS t`)...)
		}
		return out
	}
	type result struct {
		code           int
		stdout, stderr string
		rows           []string
	}
	runAt := func(jobs int) result {
		require.NoError(t, os.RemoveAll(p.Path("data")))
		r := p.Idem("run", p.Dir, "--jobs", fmt.Sprint(jobs))
		res := result{code: r.Code, stdout: r.Stdout, stderr: r.Stderr}
		if r.Code == 0 {
			res.rows = rows()
		}
		return res
	}
	serial := runAt(1)
	require.Equal(t, 0, serial.code, serial.stderr)
	require.Len(t, serial.rows, 3)
	require.Equal(t, serial, runAt(4))

	// The right branch fails: bottom is blocked, left and the sources commit.
	p.Model("right", "p", []string{"src"}, []string{"zone"}, "", "SELECT zone, no_such_column FROM {{upstream:src}}\n")
	serial = runAt(1)
	require.Equal(t, report.ExitFailure, serial.code, serial.stdout+serial.stderr)
	require.Contains(t, serial.stdout, "bottom: blocked by right (not run)\n")
	require.Equal(t, []string{"left", "src", "zones"}, clitest.QueryStrs(t, p.DB("p"), `SELECT job FROM idem.jobs ORDER BY job`))
	require.Equal(t, serial, runAt(4))
	require.Equal(t, []string{"left", "src", "zones"}, clitest.QueryStrs(t, p.DB("p"), `SELECT job FROM idem.jobs ORDER BY job`))
}
