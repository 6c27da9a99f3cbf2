package modeltest_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idem-dev/idem/internal/modeltest"
	"github.com/idem-dev/idem/internal/report"
)

// TestParseFile: a bad test file is a *report.JobFileError (exit 2) naming
// the file, the line and the key.
func TestParseFile(t *testing.T) {
	t.Parallel()
	const head = "[[test]]\nname = \"t\"\nmodel = \"m\"\n"
	cases := []struct {
		name, text, want string
	}{
		{"empty file", "# nothing\n", "x.toml: no [[test]]: a test file holds one [[test]] table per test"},
		{"no name", "[[test]]\nmodel = \"m\"\n[test.expect]\nrows = []\n", "x.toml:1: name: each [[test]] has a name (test 1 of the file has none)"},
		{"no model", "[[test]]\nname = \"t\"\n[test.expect]\nrows = []\n", `x.toml:1: model: test "t" names no model: add model = "JOB", the name of a model job of the project`},
		{"twice", head + "[test.expect]\nrows = []\n" + head + "[test.expect]\nrows = []\n", `x.toml:7: name: test "t" is named twice in the file (tests 1 and 2)`},
		{"no expect", head + "[test.given.a]\nrows = []\n", `x.toml:1: expect: test "t" has no [test.expect]: give the rows the model's result must hold`},
		{"rows and csv", head + "[test.given.a]\nrows = []\ncsv = \"x\\n\"\n[test.expect]\nrows = []\n", "x.toml:4: given.a: give rows or csv, not both"},
		{"neither", head + "[test.given.a]\ntypes = { x = \"INT\" }\n[test.expect]\nrows = []\n", "x.toml:4: given.a: give the upstream's rows"},
		{"columns in given", head + "[test.given.a]\nrows = []\ncolumns = [\"x\"]\n[test.expect]\nrows = []\n", "x.toml:6: given.a.columns: columns picks the result's columns to compare: it belongs in [test.expect]"},
		{"types in expect", head + "[test.expect]\nrows = []\ntypes = { x = \"INT\" }\n", "x.toml:6: expect.types: the expected values are cast to the types of the model's result"},
		{"timestamptz", head + "[test.given.a]\nrows = []\ntypes = { x = \"timestamp with time zone\" }\n[test.expect]\nrows = []\n", "x.toml:6: given.a.types.x: type timestamp with time zone: its text depends on the session's time zone"},
		{"nested value", head + "[test.given.a]\nrows = [ { x = [1, 2] } ]\n[test.expect]\nrows = []\n", `x.toml:5: given.a.rows[1]: column x: an array is not a value idem test reads: give a list or a struct as its text ("[1, 2]"`},
		{"csv without header", head + "[test.given.a]\ncsv = \"\"\n[test.expect]\nrows = []\n", "x.toml:5: given.a.csv: csv: no header: the first line names the columns"},
		{"csv ragged", head + "[test.given.a]\ncsv = \"\"\"\nx,y\n1\n\"\"\"\n[test.expect]\nrows = []\n", "x.toml:5: given.a.csv: csv: record on line 2: wrong number of fields"},
		{"csv header twice", head + "[test.expect]\ncsv = \"x,x\\n\"\n", "x.toml:5: expect.csv: csv: column x is named twice in the header"},
		{"columns empty", head + "[test.expect]\nrows = []\ncolumns = []\n", "x.toml:6: expect.columns: names no column"},
		{"columns leave a given one out", head + "[test.expect]\ncolumns = [\"a\"]\nrows = [ { a = 1, b = 2 } ]\n", "x.toml:5: expect.columns: the expected rows give column b, which columns does not list"},
		{"unknown key", head + "modle = \"m\"\n[test.expect]\nrows = []\n", "x.toml:4: test.modle: unknown key"},
		{"wrong type", head + "[test.expect]\nrows = \"none\"\n", "x.toml:5:"},
		{"too deep", head + "[test.expect]\nrows = " + strings.Repeat("[", 40) + strings.Repeat("]", 40) + "\n", "x.toml:5: arrays and tables nest deeper than 32 levels, the most idem reads of a TOML file"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			_, err := modeltest.ParseFile("x.toml", []byte(c.text))
			require.Error(t, err)
			var jfe *report.JobFileError
			require.ErrorAs(t, err, &jfe)
			require.Equal(t, report.ExitUsage, report.ExitCode(err))
			require.Contains(t, err.Error(), c.want)
		})
	}
}

// TestParseFileValues: the values of a fixture as idem test reads them:
// TOML dates, date-times and times keep their form, an offset date-time is
// the instant in UTC, a CSV's empty field is NULL, and the rows' columns
// keep the order the file first gives them.
func TestParseFileValues(t *testing.T) {
	t.Parallel()
	tests, err := modeltest.ParseFile("x.toml", []byte(`[[test]]
name = "values"
model = "m"
[test.given.a]
rows = [
  { z = 1, d = 2024-01-02, ts = 2024-01-02T03:04:05.5, tm = 10:00:00, tz = 2024-01-02T03:00:00+02:00, f = 1.25, b = true, s = "x" },
  { a = "later" },
]
[test.given.b]
csv = """
y,x
1,
"""
[test.expect]
columns = ["k", "v"]
rows = [ { v = 1 } ]

[[test]]
name = "second"
model = "m"
[test.expect]
rows = []
`))
	require.NoError(t, err)
	require.Len(t, tests, 2)
	a := tests[0].Given["a"]
	require.Equal(t, []string{"z", "d", "ts", "tm", "tz", "f", "b", "s", "a"}, a.Columns)
	require.Equal(t, 4, a.Line)
	b := tests[0].Given["b"]
	require.Equal(t, []string{"y", "x"}, b.Columns)
	require.True(t, b.CSV)
	require.Equal(t, []string{"k", "v"}, tests[0].Expect.Compare)
	require.Equal(t, 18, tests[1].Line)
	require.Equal(t, "values", tests[0].Name)
}

// TestFind: what idem test's paths name.
func TestFind(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	proj := filepath.Join(root, "proj")
	write(t, filepath.Join(proj, "m.toml"), model("m", `["a"]`, `["k"]`))
	write(t, filepath.Join(proj, "tests", "b.toml"), "[[test]]\n")
	write(t, filepath.Join(proj, "tests", "a.toml"), "[[test]]\n")
	write(t, filepath.Join(proj, "tests", "notes.md"), "not a test\n")
	bare := filepath.Join(root, "bare")
	write(t, filepath.Join(bare, "m.toml"), model("m", `["a"]`, `["k"]`))
	beside := filepath.Join(root, "beside")
	write(t, filepath.Join(beside, "m.toml"), model("m", `["a"]`, `["k"]`))
	write(t, filepath.Join(beside, "m_test.toml"), "[[test]]\n")
	empty := filepath.Join(root, "empty")
	write(t, filepath.Join(empty, "readme.txt"), "")

	tests := func(names ...string) []string {
		out := make([]string, len(names))
		for i, n := range names {
			out[i] = filepath.Join(proj, "tests", n)
		}
		return out
	}
	cases := []struct {
		name  string
		paths []string
		want  []modeltest.Suite
		err   string
	}{
		{"a project folder", []string{proj}, []modeltest.Suite{{Dir: proj, Files: tests("a.toml", "b.toml")}}, ""},
		{"its tests folder", []string{filepath.Join(proj, "tests")}, []modeltest.Suite{{Dir: filepath.Join(proj, "tests", ".."), Files: tests("a.toml", "b.toml")}}, ""},
		{"a test file, named twice", []string{filepath.Join(proj, "tests", "b.toml"), filepath.Join(proj, "tests", "b.toml")},
			[]modeltest.Suite{{Dir: filepath.Join(proj, "tests", ".."), Files: tests("b.toml")}}, ""},
		{"a test file beside the jobs", []string{filepath.Join(beside, "m_test.toml")}, []modeltest.Suite{{Dir: beside, Files: []string{filepath.Join(beside, "m_test.toml")}}}, ""},
		{"the project and a file of it", []string{proj, filepath.Join(proj, "tests", "a.toml")}, []modeltest.Suite{{Dir: proj, Files: tests("a.toml", "b.toml")}}, ""},
		{"a project without tests", []string{bare}, nil, bare + " holds job files but no tests/ folder: write the tests in " + filepath.Join(bare, "tests", "NAME.toml")},
		{"a folder without test files", []string{empty}, nil, "folder " + empty + " holds no test files"},
		{"nothing there", []string{filepath.Join(root, "nope")}, nil, filepath.Join(root, "nope") + ": no such test file or folder"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			got, err := modeltest.Find(c.paths)
			if c.err != "" {
				require.ErrorIs(t, err, report.ErrUsage)
				require.ErrorContains(t, err, c.err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, c.want, got)
		})
	}
}
