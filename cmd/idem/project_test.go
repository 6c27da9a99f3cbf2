package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idem-dev/idem/runner/job"
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
`, name, db, input, columns, key))
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
`, name, db, q(upstream), name, target, q(key)))
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

var _ = strings.Contains
var _ = os.Stat
