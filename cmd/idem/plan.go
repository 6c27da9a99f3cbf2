package main

import (
	"fmt"
	"strings"

	"github.com/idem-dev/idem/runner/job"
	"github.com/idem-dev/idem/runner/ops"
	"github.com/idem-dev/idem/runner/run"

	"github.com/spf13/cobra"
)

func (a *app) newPlanCmd() *cobra.Command {
	var f dbFlags
	var w writerFlags
	var input, batchID string
	var from, to int64
	cmd := &cobra.Command{
		Use:   "plan JOB",
		Short: "Show what a run would decide and which key parts changed, writing nothing",
		Long: `Show what idem run JOB would decide, writing nothing: plan runs the run's
own guards (epoch, table owners, the target's integrity, batch identity,
cursor, committed files, expected parent, released SQL) in a transaction
it rolls back, on the database opened read-only. The decision is in the
run's words (loaded, applied, skipped, already_committed, refused); a
refused plan exits 3, as the run would, with --json too.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			job, err := loadJob(args[0])
			if err != nil {
				return a.fail(f.jsonOut, err)
			}
			opts := run.RunOptions{Input: input, BatchID: batchID}
			opts.ExpectParent, opts.Epoch = w.guards(cmd)
			if cmd.Flags().Changed("from") && cmd.Flags().Changed("to") {
				opts.From, opts.To = &from, &to
			}
			dbPath, err := f.dbPath(job)
			if err != nil {
				return a.fail(f.jsonOut, err)
			}
			plan, err := ops.PlanRun(cmd.Context(), dbPath, job, opts, f.openOptions(job))
			if err != nil {
				return a.fail(f.jsonOut, err)
			}
			if f.jsonOut {
				if err := a.printJSON(plan); err != nil {
					return err
				}
			} else {
				a.printPlan(plan)
			}
			if plan.Refusal != nil {
				// The run would be refused: the plan exits as the run would.
				fmt.Fprintf(a.stderr, "idem: %v\n", plan.Refusal)
				return &codeError{code: plan.ExitCode}
			}
			return nil
		},
	}
	f.register(cmd)
	w.register(cmd)
	cmd.Flags().StringVar(&input, "input", "", "input path or glob (overrides [input] path)")
	cmd.Flags().StringVar(&batchID, "batch-id", "", "batch id of an apply run")
	cmd.Flags().Int64Var(&from, "from", 0, "the batch covers source positions (from, to]")
	cmd.Flags().Int64Var(&to, "to", 0, "upper bound of the batch's source positions")
	return cmd
}

// printPlan prints a plan in the words of the run it announces.
func (a *app) printPlan(plan *ops.Plan) {
	what := "would be " + plan.Decision
	switch {
	case plan.Decision == job.DecisionAlreadyCommitted:
		what = "already committed: a run would write nothing"
	case plan.Decision == job.DecisionSkipped:
		what = "would be skipped: nothing changed"
		if plan.Reason != "" {
			what = "would be skipped: " + plan.Reason
		}
	case plan.Decision == job.DecisionRefused:
		what = "would be refused"
	case plan.FirstLoad:
		what += " (first load)"
	case len(plan.Changed) > 0:
		what += " [" + strings.Join(plan.Changed, ", ") + " changed]"
	}
	fmt.Fprintf(a.stdout, "%s: %s\n", plan.Job, what)
	if plan.Reason != "" && plan.Decision != job.DecisionSkipped {
		fmt.Fprintf(a.stdout, "  reason    %s\n", plan.Reason)
	}
	if len(plan.NewFiles) > 0 {
		fmt.Fprintf(a.stdout, "  new files %s\n", strings.Join(plan.NewFiles, ", "))
	}
	if plan.BatchID != "" {
		fmt.Fprintf(a.stdout, "  batch     %s\n", escapeCell(plan.BatchID))
	}
	fmt.Fprintf(a.stdout, "  snapshot  %d\n", plan.Snapshot)
	if plan.JobKey != "" {
		fmt.Fprintf(a.stdout, "  job key   %s\n", plan.JobKey)
	}
}
