package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/idem-dev/idem/runner"
)

func (a *app) newLintCmd() *cobra.Command {
	var jsonOut bool
	cmd := &cobra.Command{
		Use:   "lint JOB",
		Short: "Check a job's pipeline SQL for plans that would not re-run safely",
		Long: `Check a job and its pipeline's transform and schema SQL, without
opening the job's database. Findings have an id, a severity and a fix:

  L001 error    an apply job or pipeline without key columns (rows double on replay)
  L002 error    an order-sensitive window function (row_number, lag, first_value,
                ...) whose ORDER BY is not total over its partition
  L003 error    a non-deterministic function (now, current_timestamp, random,
                uuid, gen_random_uuid, ...)
  L004 error    COPY, or string_agg/list/array_agg/first/last, without ORDER BY
       warning  INSERT ... SELECT without ORDER BY
  L005 warning  a param declared in pipeline.toml that no step reads
  L006 error    an outcomes_table declared in pipeline.toml that no step stores
                rows in (every run would fail its balance check)

Exit 0 when there is no finding of severity error, 1 when there is.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			rep, err := runner.Lint(cmd.Context(), args[0])
			if err != nil {
				return a.fail(jsonOut, err)
			}
			if jsonOut {
				if err := a.printJSON(rep); err != nil {
					return err
				}
			} else {
				for _, f := range rep.Findings {
					loc := f.File
					if f.Line > 0 {
						loc = fmt.Sprintf("%s:%d", f.File, f.Line)
					}
					fmt.Fprintf(a.stdout, "%s %s %s: %s\n    fix: %s\n", f.ID, f.Severity, loc, f.Message, f.Fix)
				}
				fmt.Fprintf(a.stdout, "%d error(s), %d warning(s)\n", rep.Errors, rep.Warnings)
			}
			if rep.Errors > 0 {
				return &codeError{code: runner.ExitFailure}
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&jsonOut, "json", false, "print one JSON object on stdout")
	return cmd
}
