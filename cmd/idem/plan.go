package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/idem-dev/idem/runner"
)

func (a *app) newPlanCmd() *cobra.Command {
	var f dbFlags
	var input, batchID string
	var from, to int64
	cmd := &cobra.Command{
		Use:   "plan JOB",
		Short: "Show what a run would decide and which key parts changed, writing nothing",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			job, err := loadJob(args[0])
			if err != nil {
				return a.fail(f.jsonOut, err)
			}
			opts := runner.RunOptions{Input: input, BatchID: batchID}
			if cmd.Flags().Changed("from") && cmd.Flags().Changed("to") {
				opts.From, opts.To = &from, &to
			}
			dbPath, err := f.dbPath(job)
			if err != nil {
				return a.fail(f.jsonOut, err)
			}
			plan, err := runner.PlanRun(cmd.Context(), dbPath, job, opts, f.openOptions(job))
			if err != nil {
				return a.fail(f.jsonOut, err)
			}
			if f.jsonOut {
				return a.printJSON(plan)
			}
			changed := "first load"
			if !plan.FirstLoad {
				changed = "nothing changed"
				if len(plan.Changed) > 0 {
					changed = strings.Join(plan.Changed, ", ") + " changed"
				}
			}
			fmt.Fprintf(a.stdout, "%s: would %s (%s)\n", plan.Job, plan.Decision, changed)
			if plan.Reason != "" {
				fmt.Fprintf(a.stdout, "  reason    %s\n", plan.Reason)
			}
			fmt.Fprintf(a.stdout, "  snapshot  %d\n  job key   %s\n", plan.Snapshot, plan.JobKey)
			return nil
		},
	}
	f.register(cmd)
	cmd.Flags().StringVar(&input, "input", "", "input path or glob (overrides [input] path)")
	cmd.Flags().StringVar(&batchID, "batch-id", "", "batch id of an apply run")
	cmd.Flags().Int64Var(&from, "from", 0, "the batch covers source positions (from, to]")
	cmd.Flags().Int64Var(&to, "to", 0, "upper bound of the batch's source positions")
	return cmd
}
