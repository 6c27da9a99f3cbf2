package cli

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/idem-dev/idem/runner"
)

func (a *app) newTestCmd() *cobra.Command {
	var jsonOut, quiet bool
	cmd := &cobra.Command{
		Use:   "test [PATH...]",
		Short: "Run the unit tests of models: given upstream rows, expected result rows, in a scratch database",
		Long: `Run the unit tests of models (pipeline = "select"). A test file holds
[[test]] tables, each naming a model of the project, the rows of every
upstream it reads and the rows its result must hold:

  [[test]]
  name = "monthly mean of two days"
  model = "weather_monthly"
  [test.given.weather_daily]
  rows = [ { station = "A", day = 2024-01-01, temp_c = 1.5 },
           { station = "A", day = 2024-01-02, temp_c = 2.5 } ]
  [test.expect]
  rows = [ { station = "A", month = "2024-01", mean_c = 2.0 } ]

Rows may also be CSV text (csv = """...""": a header line, then a line
per row, an empty field NULL). expect columns = [...] compares only those
columns. given types = { col = "TYPE" } types the columns of an upstream
that is itself a model; other upstreams take the types of their schema.

PATH is a project folder (its tests/*.toml against its job files), a
folder of test files (against the jobs of the folder above) or a test
file; none: the working directory. Each test replays the model's steps in
a scratch database of its own, under the sealing and determinism rules of
a run; the project's database is only opened read-only, for the committed
types of columns the given rows leave out. A failing test prints a
row diff: rows the result lacks (-) and has beyond the expected ones (+).

Exit 0 when every test passes, 1 when a test fails (or its model fails),
2 when a test file is bad or a run would refuse the model.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			each := func(r *runner.TestResult) {
				if !jsonOut {
					a.printTestResult(r, quiet)
				}
			}
			rep, err := runner.Test(cmd.Context(), args, each)
			if err != nil {
				return a.fail(jsonOut, err)
			}
			if jsonOut {
				if err := a.printJSON(rep); err != nil {
					return err
				}
			} else if !quiet {
				noun := "tests"
				if len(rep.Tests) == 1 {
					noun = "test"
				}
				fmt.Fprintf(a.stdout, "%d %s: %d passed, %d failed, %d bad\n", len(rep.Tests), noun, rep.Passed, rep.Failed, rep.Errors)
			}
			if code := rep.ExitCode(); code != runner.ExitOK {
				return &codeError{code: code}
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&jsonOut, "json", false, "print one JSON object on stdout")
	cmd.Flags().BoolVarP(&quiet, "quiet", "q", false, "print only the tests that do not pass")
	return cmd
}

// printTestResult prints one test's line, and why it did not pass.
func (a *app) printTestResult(r *runner.TestResult, quiet bool) {
	if r.Status == runner.TestPass {
		if !quiet {
			fmt.Fprintf(a.stdout, "ok   %s (%s)\n", r.Name, r.Model)
		}
		return
	}
	const indent = "     "
	switch {
	case r.Name == "":
		fmt.Fprintf(a.stdout, "FAIL %s\n", r.File)
	default:
		fmt.Fprintf(a.stdout, "FAIL %s (%s)\n", r.Name, r.Model)
		if !strings.HasPrefix(r.Error, r.File+":") {
			fmt.Fprintf(a.stdout, "%s%s:%d\n", indent, r.File, r.Line)
		}
	}
	for _, l := range strings.Split(strings.TrimRight(r.Explain(), "\n"), "\n") {
		fmt.Fprintf(a.stdout, "%s%s\n", indent, l)
	}
}
