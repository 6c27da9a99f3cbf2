package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"strings"

	"github.com/idem-dev/idem/runner"

	"github.com/spf13/cobra"
)

func (a *app) newPlanCmd() *cobra.Command {
	var envName string
	var f dbFlags
	var pf progressFlags
	var bf batchFlags
	pj := projectFlags{jobs: 1}
	cmd := &cobra.Command{
		Use:   "plan JOB|DIR...",
		Short: "Show what a run would decide and which key parts changed, writing nothing",
		Long: `Show what idem run JOB would decide, writing nothing: plan runs the run's
own guards (epoch, table owners, the target's integrity, batch identity,
cursor, committed files, expected parent, released SQL) in a transaction
it rolls back, on the database opened read-only. The decision is in the
run's words (loaded, applied, skipped, already_committed, refused); a
refused plan exits 3, as the run would, with --json too.

Given several job files or a folder, plan prints each job's decision in the
order a project run takes them (see idem run --help); a job whose upstream
in the project would commit first would be rebuilt too.

` + runner.SelectorHelp,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if envName != "" {
				return a.planEnv(cmd, args, f, pj, envName) // env.go
			}
			pf.silence(a, f.jsonOut)
			if pj.isProject(args) {
				return a.planProject(cmd, args, f, pf, pj)
			}
			b, err := bf.batch(cmd)
			if err != nil {
				return a.fail(f.jsonOut, err)
			}
			p, name, err := f.openOne(cmd.Context(), args[0], a.planOptions(pf)...)
			if err != nil {
				return a.fail(f.jsonOut, err)
			}
			plan, err := p.PlanJob(cmd.Context(), name, b)
			return a.printPlanned(plan, err, f.jsonOut)
		},
	}
	f.register(cmd)
	pf.register(cmd)
	pj.register(cmd, false)
	cmd.Flags().StringVar(&envName, "env", "", "plan environment `NAME`: which jobs idem run --env NAME would build, which it reads from production")
	bf.register(cmd, "batch id of an apply run",
		"the batch covers source positions (from, to]",
		"upper bound of the batch's source positions",
		"the partitions a run of a job with [target] partition_by would replace (part of its key)")
	return cmd
}

// printPlan prints a plan in the words of the run it announces.
func (a *app) printPlan(plan *runner.Plan) {
	what := "would be " + string(plan.Decision)
	switch {
	case plan.Decision == runner.DecisionAlreadyCommitted:
		what = "already committed: a run would write nothing"
	case plan.Decision == runner.DecisionSkipped:
		what = "would be skipped: nothing changed"
		if plan.Reason != "" {
			what = "would be skipped: " + plan.Reason
		}
	case plan.Decision == runner.DecisionRefused:
		what = "would be refused"
	case plan.FirstLoad:
		what += " (first load)"
	case len(plan.Changed) > 0:
		what += " [" + strings.Join(plan.Changed, ", ") + " changed]"
	}
	fmt.Fprintf(a.stdout, "%s: %s\n", plan.Job, what)
	// A refusal's reason is the error printed on stderr, once.
	if plan.Reason != "" && plan.Decision != runner.DecisionSkipped && plan.Decision != runner.DecisionRefused {
		fmt.Fprintf(a.stdout, "  reason    %s\n", plan.Reason)
	}
	if len(plan.NewFiles) > 0 {
		fmt.Fprintf(a.stdout, "  new files %s\n", strings.Join(plan.NewFiles, ", "))
	}
	if plan.BatchID != "" {
		fmt.Fprintf(a.stdout, "  batch     %s\n", escapeCell(plan.BatchID))
	}
	fmt.Fprintf(a.stdout, "  snapshot  %d\n", plan.Snapshot)
	if len(plan.Upstream) > 0 {
		fmt.Fprintf(a.stdout, "  upstream  %s\n", upstreamText(plan.Upstream))
	}
	if plan.JobKey != "" {
		fmt.Fprintf(a.stdout, "  job key   %s\n", plan.JobKey)
	}
	if mc := plan.ModelChange; mc != nil {
		fmt.Fprintf(a.stdout, "  change    %s: %s\n", mc.Class, mc.Reason)
		if mc.RowsCompared {
			fmt.Fprintf(a.stdout, "  rows      %d key(s) change in the columns kept (both versions run on the pinned upstream rows)\n", mc.RowsChanged)
		}
		if cs := columnChangesText(mc.ColumnsAdded, mc.ColumnsRemoved, mc.ColumnsRetyped); cs != "" {
			fmt.Fprintf(a.stdout, "  columns   %s\n", cs)
		}
		if len(mc.Downstream) > 0 {
			fmt.Fprintf(a.stdout, "  rebuilds  %s (they read it)\n", strings.Join(mc.Downstream, ", "))
		}
	}
	if plan.Decision.Committed() {
		// What the run does to make the steps' bytes a function of their
		// inputs (README "Sealed and reproducible").
		sealed := "sealed; steps on one thread"
		if len(plan.Upstream) > 0 {
			sealed += ", upstream rows ORDER BY ALL"
		}
		fmt.Fprintf(a.stdout, "  sql       %s\n", sealed)
	}
}

// planOptions are the runner options of idem plan.
func (a *app) planOptions(pf progressFlags) []runner.Option {
	return []runner.Option{a.progressOption(pf), runner.WithFaultHook(a.faultHook)}
}

// printPlanned prints a plan of one job, or why none could be made. A
// plan the run would be refused prints, and exits as the run would.
func (a *app) printPlanned(plan *runner.Plan, err error, jsonOut bool) error {
	if plan == nil {
		return a.fail(jsonOut, err)
	}
	if jsonOut {
		if perr := a.printJSON(plan); perr != nil {
			return perr
		}
	} else {
		a.printPlan(plan)
	}
	var je *runner.JobError
	if errors.As(err, &je) {
		fmt.Fprintf(a.stderr, "idem: %v\n", je.Err)
		return &codeError{code: je.Code}
	}
	return nil
}

// planProject is idem plan over a project: runner's Project.Plan, each
// job printed in run order; with --json one array, an object per job.
func (a *app) planProject(cmd *cobra.Command, args []string, f dbFlags, pf progressFlags, pj projectFlags) error {
	if err := oneJobFlag(cmd); err != nil {
		return a.fail(f.jsonOut, err)
	}
	opts := append(f.options(a.planOptions(pf)...), pj.options(a)...)
	var objs []json.RawMessage
	worst := 0
	opts = append(opts, runner.WithConcurrency(runtime.NumCPU()), runner.WithEachPlan(func(pl *runner.Plan, err error) {
		code := runner.ExitCode(err)
		worst = max(worst, code)
		var je *runner.JobError
		switch {
		case pl != nil && pl.Decision == runner.DecisionBlocked && f.jsonOut:
			b, _ := json.Marshal(map[string]any{"job": pl.Job, "decision": "blocked", "blocked_by": pl.BlockedBy})
			objs = append(objs, b)
		case pl != nil && pl.Decision == runner.DecisionBlocked:
			fmt.Fprintf(a.stdout, "%s: blocked by %s (not run)\n", pl.Job, strings.Join(pl.BlockedBy, ", "))
		case !errors.As(err, &je):
			if f.jsonOut {
				objs = append(objs, rawJSON(pl))
				return
			}
			a.printPlan(pl)
		default:
			// A plan the run would be refused prints; a plan that could
			// not be made (pl nil) is its error.
			if pl != nil && !f.jsonOut {
				a.printPlan(pl)
			}
			fmt.Fprintf(a.stderr, "idem: %v\n", je.Err)
			if f.jsonOut {
				var obj any = map[string]any{"error": je.Err.Error(), "exit_code": je.Code}
				if pl != nil {
					obj = pl
				}
				objs = append(objs, projectFailure(je, obj))
			}
		}
	}))
	p, err := runner.Open(cmd.Context(), args, opts...)
	if err != nil {
		return a.fail(f.jsonOut, err)
	}
	if len(p.Jobs()) == 0 {
		pj.pickedNone(a)
	}
	_, err = p.Plan(cmd.Context())
	return a.projectDone(f.jsonOut, objs, err, worst)
}
