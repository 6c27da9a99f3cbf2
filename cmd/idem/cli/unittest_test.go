package cli

import (
	"encoding/json"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idem-dev/idem/cmd/idem/cli/internal/clitest"
)

// TestTestCommand: idem test's wiring: a line per test and a summary, a
// row diff for a failing test, exit 0 when all pass, 1 for a failure, 2
// for a bad test file; -q prints only what did not pass; --json one
// object. The project's database is never opened.
func TestTestCommand(t *testing.T) {
	t.Parallel()
	p := clitest.NewProject(t)
	p.Model("daily", "p", []string{"src"}, []string{"day"}, "", "SELECT day, sum(amount) AS amount FROM {{upstream:src}} WHERE idem_status = 'active' GROUP BY day\n")
	given := `[test.given.src]
rows = [
  { id = 1, day = 2024-01-01, zone = 1, amount = 10.00 },
  { id = 2, day = 2024-01-01, zone = 2, amount = 5.50 },
]
`
	p.Write("tests/daily.toml", `[[test]]
name = "sums per day"
model = "daily"
`+given+`[test.expect]
rows = [ { day = 2024-01-01, amount = 15.50 } ]
`)
	p.Write("more/wrong.toml", `[[test]]
name = "wrong sum"
model = "daily"
`+given+`[test.expect]
rows = [ { day = 2024-01-01, amount = 15 } ]
`)
	p.Write("more/bad.toml", `[[test]]
name = "typo"
model = "daily"
`+given+`[test.expect]
row = []
`)

	r := p.Idem("test", p.Dir)
	require.Equal(t, 0, r.Code, r.Stdout+r.Stderr)
	require.Equal(t, "ok   sums per day (daily)\n1 test: 1 passed, 0 failed, 0 bad\n", r.Stdout)

	r = p.Idem("test", "-q", p.Dir)
	require.Equal(t, 0, r.Code, r.Stderr)
	require.Empty(t, r.Stdout)

	wrong := p.Path("more/wrong.toml")
	r = p.Idem("test", p.Dir, wrong)
	require.Equal(t, 1, r.Code, r.Stderr)
	require.Equal(t, "ok   sums per day (daily)\n"+
		"FAIL wrong sum (daily)\n"+
		"     "+wrong+":1\n"+
		"     1 row missing (-), 1 unexpected (+); the result has 1 row, the test expects 1\n"+
		"        day         amount\n"+
		"     -  2024-01-01  15.00\n"+
		"     +  2024-01-01  15.50\n"+
		"2 tests: 1 passed, 1 failed, 0 bad\n", r.Stdout)

	// The worst met: a bad file (exit 2) beside a failure; -q still
	// reports both.
	r = p.Idem("test", "-q", p.Path("more"))
	require.Equal(t, 2, r.Code, r.Stderr)
	require.Contains(t, r.Stdout, "FAIL wrong sum (daily)\n")
	require.Contains(t, r.Stdout, "FAIL "+p.Path("more/bad.toml")+"\n     "+p.Path("more/bad.toml")+":10: test.expect.row: unknown key")
	require.NotContains(t, r.Stdout, "ok ")

	r = p.Idem("test", "--json", p.Path("more"))
	require.Equal(t, 2, r.Code, r.Stderr)
	var rep struct {
		Tests []struct {
			Name, Status string
			ExitCode     int        `json:"exit_code"`
			Missing      [][]string `json:"missing"`
		}
		Passed, Failed, Errors int
	}
	require.NoError(t, json.Unmarshal([]byte(r.Stdout), &rep), r.Stdout)
	require.Equal(t, 0, rep.Passed)
	require.Equal(t, 1, rep.Failed)
	require.Equal(t, 1, rep.Errors)
	require.Equal(t, "error", rep.Tests[0].Status)
	require.Equal(t, 2, rep.Tests[0].ExitCode)
	require.Equal(t, [][]string{{"2024-01-01", "15.00"}}, rep.Tests[1].Missing)

	r = p.Idem("test", p.Path("nothing"))
	require.Equal(t, 2, r.Code)
	require.Contains(t, r.Stderr, p.Path("nothing")+": no such test file or folder")

	require.NoDirExists(t, p.Path("data"), "idem test never opens the project's database")
}

// TestTestRefusesAsRunDoes: a model that a run refuses (it reads a table
// of the database that is not a declared upstream) is refused by idem test
// with the run's message, exit 2; the run is made once that table exists,
// as idem test makes the tables of the model's database.
func TestTestRefusesAsRunDoes(t *testing.T) {
	t.Parallel()
	p := clitest.NewProject(t)
	p.Model("named", "p", []string{"src"}, []string{"id"}, "", "SELECT s.id, z.zone\nFROM {{upstream:src}} AS s\nJOIN zones AS z ON z.zone_id = s.zone\n")
	p.Write("tests/named.toml", `[[test]]
name = "names the zones"
model = "named"
[test.given.src]
rows = [ { id = 1, day = 2024-01-01, zone = 1, amount = 10.00 } ]
[test.expect]
rows = [ { id = 1, zone = "north" } ]
`)
	test := p.Idem("test", p.Dir)
	require.Equal(t, 2, test.Code, test.Stdout+test.Stderr)
	for _, j := range []string{"src.toml", "zones.toml"} {
		r := p.Idem("run", p.Path(j))
		require.Equal(t, 0, r.Code, r.Stderr)
	}
	run := p.Idem("run", p.Path("named.toml"))
	require.Equal(t, 2, run.Code, run.Stdout+run.Stderr)
	refusal := regexp.MustCompile(`(?m)^\s*(\S*models/named/v1\.sql line \d+: .*)$`)
	m := refusal.FindStringSubmatch(test.Stdout)
	require.NotNil(t, m, test.Stdout)
	require.Contains(t, m[1], "reads table zones of the database, which is not a declared upstream")
	require.Contains(t, run.Stdout+run.Stderr, m[1])
}

// TestTestExamples: the example project's tests pass.
func TestTestExamples(t *testing.T) {
	t.Parallel()
	r := clitest.CallIdem(t, "test", filepath.Join(clitest.RepoRoot(t), "configs", "trips"))
	require.Equal(t, 0, r.Code, r.Stdout+r.Stderr)
	require.Contains(t, r.Stdout, "3 tests: 3 passed, 0 failed, 0 bad\n")
}
