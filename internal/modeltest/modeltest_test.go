package modeltest_test

import (
	"context"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idem-dev/idem/internal/modeltest"
	"github.com/idem-dev/idem/pipelines"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

func write(t *testing.T, path, text string) {
	t.Helper()
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
	require.NoError(t, os.WriteFile(path, []byte(text), 0o644))
}

// source is a merge_by_key job file reading input/NAME.csv.
func source(name, columns, key string) string {
	return `name = "` + name + `"
pipeline = "merge_by_key"
transform_version = 1
schema_version = 1
database = "data/w.duckdb"

[input]
path = "input/` + name + `.csv"

[input.columns]
` + columns + `

[target]
key = ` + key + "\n"
}

// model is a model job file reading upstream, its SQL models/NAME/v1.sql.
func model(name, upstream, key string) string {
	return `name = "` + name + `"
pipeline = "select"
transform_version = 1
database = "data/w.duckdb"

[input]
upstream = ` + upstream + `

[transform]
sql = "models/` + name + `"

[target]
key = ` + key + "\n"
}

// newProject writes a project of two source jobs (weather_daily,
// stations) and models over them, with no tests yet: weather_monthly (the
// mean temperature per station and month), weather_warm (the warm months
// of weather_monthly, a model over a model), and models a run refuses or
// fails: sneaky reads the stations table without declaring it, dice calls
// random(), dup gives one row per reading under a key of its station; and
// temps, the list of a station's temperatures.
func newProject(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	files := map[string]string{
		"weather_daily.toml":   source("weather_daily", "station = \"VARCHAR\"\nday = \"DATE\"\ntemp_c = \"DOUBLE\"", `["station", "day"]`),
		"stations.toml":        source("stations", "station = \"VARCHAR\"\nname = \"VARCHAR\"", `["station"]`),
		"weather_monthly.toml": model("weather_monthly", `["weather_daily"]`, `["station", "month"]`),
		"models/weather_monthly/v1.sql": `-- The mean temperature per station and month.
SELECT station, strftime(day, '%Y-%m') AS month, avg(temp_c) AS mean_c
FROM {{upstream:weather_daily}}
WHERE idem_status = 'active'
GROUP BY station, month
`,
		"weather_warm.toml":          model("weather_warm", `["weather_monthly"]`, `["station", "month"]`),
		"models/weather_warm/v1.sql": "SELECT station, month, mean_c FROM {{upstream:weather_monthly}} WHERE mean_c >= 20\n",
		"sneaky.toml":                model("sneaky", `["weather_daily"]`, `["station", "day"]`),
		"models/sneaky/v1.sql":       "SELECT d.station, d.day, s.name\nFROM {{upstream:weather_daily}} AS d\nJOIN stations AS s USING (station)\n",
		"dice.toml":                  model("dice", `["weather_daily"]`, `["station", "day"]`),
		"models/dice/v1.sql":         "SELECT station, day, random() AS r FROM {{upstream:weather_daily}}\n",
		"temps.toml":                 model("temps", `["weather_daily"]`, `["station"]`),
		"models/temps/v1.sql":        "SELECT station, list(temp_c ORDER BY day) AS temps FROM {{upstream:weather_daily}} GROUP BY station\n",
		"dup.toml":                   model("dup", `["weather_daily"]`, `["station"]`),
		"models/dup/v1.sql":          "SELECT station, day FROM {{upstream:weather_daily}}\n",
	}
	for name, text := range files {
		write(t, filepath.Join(dir, name), text)
	}
	return dir
}

// twoDays is a [test.given.weather_daily] of two days of station A.
const twoDays = `[test.given.weather_daily]
rows = [
  { station = "A", day = 2024-01-01, temp_c = 1.5 },
  { station = "A", day = 2024-01-02, temp_c = 2.5 },
]
`

// TestRun runs one project's tests, a file per case, in one Run (one
// scratch template, as idem test runs them) and checks each test's status,
// exit code and what it says.
func TestRun(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		file   string
		status string
		code   int
		want   string // in the error (or the diff)
		golden bool   // Explain is testdata/<name>.golden
	}{
		{name: "pass_rows", file: `[[test]]
name = "monthly mean of two days"
model = "weather_monthly"
` + twoDays + `
[test.expect]
rows = [ { station = "A", month = "2024-01", mean_c = 2.0 } ]
`, status: modeltest.StatusPass},

		// CSV on both sides; an empty field is NULL (avg skips it), a
		// conflict row is left out by the model.
		{name: "pass_csv", file: `[[test]]
name = "csv"
model = "weather_monthly"
[test.given.weather_daily]
csv = """
station,day,temp_c,idem_status
A,2024-01-01,1.5,active
A,2024-01-02,,active
A,2024-01-03,99,conflict
B,2024-02-01,-3,active
"""
[test.expect]
csv = """
station,month,mean_c
A,2024-01,1.5
B,2024-02,-3
"""
`, status: modeltest.StatusPass},

		// A row expected twice and a wrong value: a multiset diff, in key
		// order, missing before unexpected.
		{name: "fail_diff", file: `[[test]]
name = "wrong mean"
model = "weather_monthly"
[test.given.weather_daily]
rows = [
  { station = "B", day = 2024-03-01, temp_c = 10.0 },
  { station = "A", day = 2024-01-01, temp_c = 1.5 },
  { station = "A", day = 2024-01-02, temp_c = 2.5 },
  { station = "A", day = 2024-02-01, temp_c = 5 },
]
[test.expect]
rows = [
  { station = "A", month = "2024-01", mean_c = 2.5 },
  { station = "A", month = "2024-02", mean_c = 5 },
  { station = "B", month = "2024-03", mean_c = 10 },
  { station = "B", month = "2024-03", mean_c = 10 },
]
`, status: modeltest.StatusFail, code: 1, golden: true},

		// Types of a model upstream: given, and inferred from the values.
		{name: "types", file: `[[test]]
name = "warm months"
model = "weather_warm"
[test.given.weather_monthly]
types = { mean_c = "DECIMAL(5,2)" }
rows = [ { station = "A", month = "2024-07", mean_c = 21.5 }, { station = "A", month = "2024-01", mean_c = 2 } ]
[test.expect]
rows = [ { station = "A", month = "2024-07", mean_c = "21.50" } ]
`, status: modeltest.StatusPass},
		{name: "types_inferred", file: `[[test]]
name = "warm months, a DOUBLE"
model = "weather_warm"
[test.given.weather_monthly]
rows = [ { station = "A", month = "2024-07", mean_c = 21.5 } ]
[test.expect]
rows = [ { station = "A", month = "2024-07", mean_c = "21.50" } ]
`, status: modeltest.StatusPass},
		// An offset date-time is the instant in UTC, a TIMESTAMP.
		{name: "types_utc", file: `[[test]]
name = "a date-time with an offset"
model = "weather_warm"
[test.given.weather_monthly]
rows = [ { station = "A", month = 2024-07-01T10:00:00+02:00, mean_c = 30 } ]
[test.expect]
rows = [ { station = "A", month = "2024-07-01 08:00:00", mean_c = 30 } ]
`, status: modeltest.StatusPass},
		{name: "types_mixed", file: `[[test]]
name = "mixed"
model = "weather_warm"
[test.given.weather_monthly]
rows = [ { station = "A", month = "2024-07", mean_c = 21 }, { station = "B", month = "2024-07", mean_c = "hot" } ]
[test.expect]
rows = []
`, status: modeltest.StatusError, code: 2, want: "types_mixed.toml:4: given.weather_monthly: column mean_c: its values mix string and integer: give its type in types"},
		{name: "types_for_schema", file: `[[test]]
name = "types of a source"
model = "weather_monthly"
[test.given.weather_daily]
types = { temp_c = "DECIMAL(5,1)" }
rows = []
[test.expect]
rows = []
`, status: modeltest.StatusError, code: 2, want: "types_for_schema.toml:5: given.weather_daily.types: upstream weather_daily's columns are those of its schema (station, day, temp_c, idem_status)"},
		{name: "types_bad_name", file: `[[test]]
name = "bad type"
model = "weather_warm"
[test.given.weather_monthly]
types = { mean_c = "INT; DROP TABLE x" }
rows = []
[test.expect]
rows = []
`, status: modeltest.StatusError, code: 2, want: `types_bad_name.toml:5: given.weather_monthly.types.mean_c: type "INT; DROP TABLE x" is not a DuckDB type name`},

		// A list is given as its text, cast to the list type; a diff of
		// lists is ordered by their text.
		{name: "list", file: `[[test]]
name = "temperatures in day order"
model = "temps"
` + twoDays + `
[test.expect]
rows = [ { station = "A", temps = "[1.5, 2.5]" } ]
`, status: modeltest.StatusPass},
		{name: "list_diff", file: `[[test]]
name = "temperatures in the wrong order"
model = "temps"
` + twoDays + `
[test.expect]
rows = [ { station = "A", temps = "[2.5,1.5]" } ]
`, status: modeltest.StatusFail, code: 1, want: "   station  temps\n-  A        [2.5, 1.5]\n+  A        [1.5, 2.5]\n"},
		{name: "missing_upstream", file: `[[test]]
name = "no given"
model = "weather_monthly"
[test.expect]
rows = []
`, status: modeltest.StatusError, code: 2, want: "missing_upstream.toml:1: given: model weather_monthly reads upstream weather_daily ({{upstream:weather_daily}}): give its rows in [test.given.weather_daily]"},
		{name: "extra_given", file: `[[test]]
name = "extra"
model = "weather_monthly"
` + twoDays + `
[test.given.stations]
rows = []

[test.expect]
rows = []
`, status: modeltest.StatusError, code: 2, want: "extra_given.toml:10: given.stations: model weather_monthly does not read stations: its upstreams are weather_daily"},
		{name: "bad_toml", file: `[[test]]
name = "broken"
model = "weather_monthly"
rows = [ { station = "A" }
`, status: modeltest.StatusError, code: 2, want: "bad_toml.toml:4: test.rows: expected a comma (',') or array terminator (']'), but got end of file"},
		{name: "unknown_key", file: `[[test]]
name = "typo"
model = "weather_monthly"
` + twoDays + `
[test.expect]
colums = ["station"]
rows = []
`, status: modeltest.StatusError, code: 2, want: "unknown_key.toml:11: test.expect.colums: unknown key"},
		{name: "bad_value", file: `[[test]]
name = "warm is no number"
model = "weather_monthly"
[test.given.weather_daily]
rows = [
  { station = "A", day = 2024-01-01, temp_c = 1.5 },
  { station = "A", day = 2024-01-02, temp_c = "warm" },
]
[test.expect]
rows = []
`, status: modeltest.StatusError, code: 2, want: `bad_value.toml:5: given.weather_daily.rows[2]: column temp_c: "warm" is not a DOUBLE (its type in the upstream's target)`},
		{name: "bad_column", file: `[[test]]
name = "no such column"
model = "weather_monthly"
[test.given.weather_daily]
rows = [ { station = "A", day = 2024-01-01, temp = 1.5 } ]
[test.expect]
rows = []
`, status: modeltest.StatusError, code: 2, want: "bad_column.toml:4: given.weather_daily: column temp is not a column of weather_daily's target (station, day, temp_c, idem_status)"},
		{name: "not_a_model", file: `[[test]]
name = "source"
model = "stations"
[test.expect]
rows = []
`, status: modeltest.StatusError, code: 2, want: `not_a_model.toml:3: model: job stations runs pipeline merge_by_key: idem test runs models (pipeline = "select")`},
		{name: "no_model", file: `[[test]]
name = "nothing"
model = "weather_yearly"
[test.expect]
rows = []
`, status: modeltest.StatusError, code: 2, want: "no_model.toml:3: model: no job of the project is named weather_yearly (its models: dice, dup, sneaky, temps, weather_monthly, weather_warm)"},

		// A run refuses these models; idem test refuses them with the same
		// message (exit 2).
		{name: "sealed_read", file: `[[test]]
name = "reads stations"
model = "sneaky"
` + twoDays + `
[test.expect]
rows = []
`, status: modeltest.StatusError, code: 2, want: "job sneaky: its SQL reaches outside its declared inputs and tables, or gives other bytes on every run; refused:\n  " +
			"models/sneaky/v1.sql line 3: reads table stations of the database, which is not a declared upstream: declare it in [input] upstream and read it as {{upstream:stations}}"},
		{name: "sealed_random", file: `[[test]]
name = "dice"
model = "dice"
` + twoDays + `
[test.expect]
rows = []
`, status: modeltest.StatusError, code: 2, want: "models/dice/v1.sql line 1: random() gives another value on every run"},
		// A run fails this one (exit 1): two rows for one key.
		{name: "key_not_unique", file: `[[test]]
name = "dup"
model = "dup"
` + twoDays + `
[test.expect]
rows = []
`, status: modeltest.StatusFail, code: 1, want: "model dup: key (station) must be unique and not NULL: (A) 2 rows; nothing committed"},

		{name: "columns_differ", file: `[[test]]
name = "no mean"
model = "weather_monthly"
` + twoDays + `
[test.expect]
rows = [ { station = "A", month = "2024-01", mean = 2.0 } ]
`, status: modeltest.StatusFail, code: 1, want: "the columns differ: the result of weather_monthly has columns station, month, mean_c; the expected rows give mean, which the result does not have; the result has mean_c, which the expected rows do not give"},
		{name: "columns_subset", file: `[[test]]
name = "the months"
model = "weather_monthly"
` + twoDays + `
[test.expect]
columns = ["month"]
rows = [ { month = "2024-01" } ]
`, status: modeltest.StatusPass},
		{name: "expect_not_castable", file: `[[test]]
name = "not a number"
model = "weather_monthly"
` + twoDays + `
[test.expect]
rows = [ { station = "A", month = "2024-01", mean_c = "two" } ]
`, status: modeltest.StatusFail, code: 1, want: `expect.rows[1]: column mean_c: "two" is not a DOUBLE, the type of column mean_c of the result of weather_monthly`},
	}
	dir := newProject(t)
	for _, c := range cases {
		write(t, filepath.Join(dir, "tests", c.name+".toml"), c.file)
	}
	// Run from the project folder, as a user does, so that files are named
	// relative to it.
	rep := runIn(t, dir, nil)
	byFile := map[string]*modeltest.Result{}
	for _, r := range rep.Tests {
		byFile[strings.TrimSuffix(filepath.Base(r.File), ".toml")] = r
	}
	require.Len(t, rep.Tests, len(cases))
	require.Equal(t, 2, rep.ExitCode(), "the worst met: a bad test")
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := byFile[c.name]
			require.NotNil(t, r)
			require.Equal(t, c.status, r.Status, "%s", r.Explain())
			require.Equal(t, c.code, r.ExitCode)
			if c.golden {
				golden := filepath.Join("testdata", c.name+".golden")
				if *update {
					write(t, golden, r.Explain())
				}
				want, err := os.ReadFile(golden)
				require.NoError(t, err)
				require.Equal(t, string(want), r.Explain())
			}
			require.Contains(t, r.Explain(), c.want)
		})
	}
	require.NoDirExists(t, filepath.Join(dir, "data"), "idem test never opens the project's database")
}

// runIn runs the tests paths name (none: the folder) from folder dir.
func runIn(t *testing.T, dir string, paths []string) *modeltest.Report {
	t.Helper()
	// Files are named as found: relative paths need dir as working
	// directory, which a parallel test cannot change; the paths are
	// joined to dir instead and the folder trimmed from the names.
	if len(paths) == 0 {
		paths = []string{dir}
	}
	rep, err := modeltest.Run(context.Background(), paths, modeltest.Options{Builtins: pipelines.FS})
	require.NoError(t, err)
	for _, r := range rep.Tests {
		r.File = strings.TrimPrefix(r.File, dir+string(filepath.Separator))
		r.Error = strings.ReplaceAll(r.Error, dir+string(filepath.Separator), "")
	}
	return rep
}

// relationships is an audit of a model's stations against the stations
// job: a reason to declare stations an upstream that the SQL does not read.
const relationships = "\n[[audit]]\nkind = \"relationships\"\ncolumn = \"station\"\nto = \"stations.station\"\n"

// TestUnreadUpstreamNeedsNoRows: a test gives the rows of the upstreams
// the model's SQL reads; one that [input] upstream declares for an audit
// and the SQL does not read needs none, and a missing read one is named as
// read.
func TestUnreadUpstreamNeedsNoRows(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for name, text := range map[string]string{
		"weather_daily.toml": source("weather_daily", "station = \"VARCHAR\"\nday = \"DATE\"\ntemp_c = \"DOUBLE\"", `["station", "day"]`),
		"stations.toml":      source("stations", "station = \"VARCHAR\"\nname = \"VARCHAR\"", `["station"]`),
		"seen.toml":          model("seen", `["weather_daily", "stations"]`, `["station"]`) + relationships,
		"models/seen/v1.sql": "SELECT DISTINCT station FROM {{upstream:weather_daily}}\n",
		"tests/seen.toml": `[[test]]
name = "stations seen"
model = "seen"
` + twoDays + `
[test.expect]
rows = [ { station = "A" } ]

[[test]]
name = "no rows of the read upstream"
model = "seen"
[test.given.stations]
rows = [ { station = "A", name = "Alpha" } ]
[test.expect]
rows = []
`,
	} {
		write(t, filepath.Join(dir, name), text)
	}
	rep := runIn(t, dir, nil)
	require.Len(t, rep.Tests, 2)
	require.Equal(t, modeltest.StatusPass, rep.Tests[0].Status, rep.Tests[0].Explain())
	require.Equal(t, modeltest.StatusError, rep.Tests[1].Status)
	require.Contains(t, rep.Tests[1].Explain(), "model seen reads upstream weather_daily ({{upstream:weather_daily}}): give its rows in [test.given.weather_daily]")
	require.NotContains(t, rep.Tests[1].Explain(), "stations")
}

// TestUncommittedModelUpstreamTypes: an upstream model that never
// committed is typed by its SELECT over its own upstreams (DESCRIBE, two
// models deep here), so a test gives only the columns it is about: the
// columns its rows leave out are there with their types, and an empty
// given table needs no types. When the SELECT does not bind, the error
// names the model and the column.
func TestUncommittedModelUpstreamTypes(t *testing.T) {
	t.Parallel()
	dir := newProject(t)
	for name, text := range map[string]string{
		"warm_count.toml":          model("warm_count", `["weather_warm"]`, `["station"]`),
		"models/warm_count/v1.sql": "SELECT station, count(*) AS months, max(month) AS last FROM {{upstream:weather_warm}} GROUP BY station\n",
		"bad.toml":                 model("bad", `["weather_daily"]`, `["station"]`),
		"models/bad/v1.sql":        "SELECT station, no_such_column FROM {{upstream:weather_daily}}\n",
		"over_bad.toml":            model("over_bad", `["bad"]`, `["station"]`),
		"models/over_bad/v1.sql":   "SELECT station FROM {{upstream:bad}}\n",
		"tests/types.toml": `[[test]]
name = "mean_c left out: NULL, not warm"
model = "weather_warm"
[test.given.weather_monthly]
rows = [ { station = "A", month = "2024-07" } ]
[test.expect]
rows = []

[[test]]
name = "no rows, no types"
model = "weather_warm"
[test.given.weather_monthly]
rows = []
[test.expect]
rows = []

[[test]]
name = "two models deep"
model = "warm_count"
[test.given.weather_warm]
rows = [ { station = "A" }, { station = "A" } ]
[test.expect]
rows = [ { station = "A", months = 2 } ]
columns = ["station", "months"]

[[test]]
name = "an upstream that does not bind"
model = "over_bad"
[test.given.bad]
rows = []
[test.expect]
rows = []
`,
	} {
		write(t, filepath.Join(dir, name), text)
	}
	rep := runIn(t, dir, []string{filepath.Join(dir, "tests", "types.toml")})
	require.Len(t, rep.Tests, 4)
	for _, r := range rep.Tests[:3] {
		require.Equal(t, modeltest.StatusPass, r.Status, "%s: %s", r.Name, r.Explain())
	}
	require.Equal(t, modeltest.StatusError, rep.Tests[3].Status)
	require.Contains(t, rep.Tests[3].Explain(), "given.bad: the rows give no column, and bad's columns cannot be described (model models/bad/v1.sql:")
	require.Contains(t, rep.Tests[3].Explain(), "no_such_column")
}
