package cli

import (
	"context"
	"errors"
	"fmt"
	"github.com/idem-dev/idem/runner"
	"os"
	"runtime"
	"strings"

	"github.com/idem-dev/idem/internal/job"
	"github.com/idem-dev/idem/internal/ops"
	"github.com/idem-dev/idem/internal/project"
	"github.com/idem-dev/idem/internal/run"

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

` + project.SelectorHelp,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if envName != "" {
				_, groups, err := a.planEnv(cmd, args, f, pj, envName)
				if err != nil {
					return a.fail(f.jsonOut, err)
				}
				var envs []*ops.Environment
				for _, g := range groups {
					envs = append(envs, g.env)
				}
				return a.printEnvs(envs, f.jsonOut)
			}
			pf.silence(a, f.jsonOut)
			if pj.isProject(args) {
				p, err := a.loadProject(cmd, args, pj)
				if err != nil {
					return a.fail(f.jsonOut, err)
				}
				opts, err := bf.runOptions(cmd)
				if err != nil {
					return a.fail(f.jsonOut, err)
				}
				return a.runProject(cmd.Context(), p, runtime.NumCPU(), f.jsonOut, func(sub *app, j *job.Job, upstream map[string]string) (string, error) {
					return sub.planJob(cmd, j, f, opts, upstream, p.Downstream(j))
				})
			}
			opts, err := bf.runOptions(cmd)
			if err != nil {
				return a.fail(f.jsonOut, err)
			}
			j, err := loadJob(args[0])
			if err != nil {
				return a.fail(f.jsonOut, err)
			}
			_, err = a.planJob(cmd, j, f, opts, nil, nil)
			return err
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
	// A refusal's reason is the error printed on stderr, once.
	if plan.Reason != "" && plan.Decision != job.DecisionSkipped && plan.Decision != job.DecisionRefused {
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
		fmt.Fprintf(a.stdout, "  upstream  %s\n", upstreamText(publicUpstream(plan.Upstream)))
	}
	if plan.JobKey != "" {
		fmt.Fprintf(a.stdout, "  job key   %s\n", plan.JobKey)
	}
	if mc := plan.ModelChange; mc != nil {
		fmt.Fprintf(a.stdout, "  change    %s: %s\n", mc.Class, mc.Reason)
		if mc.RowsCompared {
			fmt.Fprintf(a.stdout, "  rows      %d key(s) change in the columns kept (both versions run on the pinned upstream rows)\n", mc.RowsChanged)
		}
		if cs := columnChangesText(mc.ColumnsAdded, mc.ColumnsRemoved, publicRetyped(mc.ColumnsRetyped)); cs != "" {
			fmt.Fprintf(a.stdout, "  columns   %s\n", cs)
		}
		if len(mc.Downstream) > 0 {
			fmt.Fprintf(a.stdout, "  rebuilds  %s (they read it)\n", strings.Join(mc.Downstream, ", "))
		}
	}
	if plan.Decision == job.DecisionLoaded || plan.Decision == job.DecisionApplied {
		// What the run does to make the steps' bytes a function of their
		// inputs (README "Sealed and reproducible").
		sealed := "sealed; steps on one thread"
		if len(plan.Upstream) > 0 {
			sealed += ", upstream rows ORDER BY ALL"
		}
		fmt.Fprintf(a.stdout, "  sql       %s\n", sealed)
	}
}

// planJob plans one loaded job and prints the plan. upstream holds the
// decisions already planned for jobs of the project this one reads: a job
// whose upstream would write is rebuilt after it, whatever the committed
// state says now. It returns the plan's decision.
//
// downstream names the project's jobs that read this one, which a model's
// change rebuilds.
func (a *app) planJob(cmd *cobra.Command, j *job.Job, f dbFlags, opts run.RunOptions, upstream map[string]string, downstream []string) (string, error) {
	dbPath, err := f.dbPath(j)
	if err != nil {
		return "", a.fail(f.jsonOut, err)
	}
	plan, err := a.planOn(cmd.Context(), dbPath, j, opts, f.openOptions(j))
	if err != nil {
		return "", a.fail(f.jsonOut, err)
	}
	plan.AfterUpstream(j, upstream)
	if plan.ModelChange != nil && downstream != nil {
		plan.ModelChange.Downstream = downstream
	}
	if f.jsonOut {
		if err := a.printJSON(plan); err != nil {
			return "", err
		}
	} else {
		a.printPlan(plan)
	}
	if plan.Refusal != nil {
		// The run would be refused: the plan exits as the run would.
		fmt.Fprintf(a.stderr, "idem: %v\n", plan.Refusal)
		return plan.Decision, &codeError{code: plan.ExitCode}
	}
	return plan.Decision, nil
}

// planOn plans job j on the database at dbPath, opened read-only once for
// every job of a project that names it (a.openDB); a database that does
// not exist yet, or holds no idem tables, plans every job from scratch.
func (a *app) planOn(ctx context.Context, dbPath string, j *job.Job, opts run.RunOptions, open run.OpenOptions) (plan *ops.Plan, err error) {
	if _, err := os.Stat(dbPath); errors.Is(err, os.ErrNotExist) {
		return ops.PlanRunDB(ctx, nil, j, opts)
	}
	open.ReadOnly = true
	db, done, err := a.openDB(ctx, dbPath, open)
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, done(err)) }()
	ok, err := ops.HasCatalog(ctx, db)
	if err != nil {
		return nil, err
	}
	if !ok {
		db = nil
	}
	return ops.PlanRunDB(ctx, db, j, opts)
}

// publicRetyped is runner's copy of retyped columns (until plan and env
// move onto runner, issue 46).
func publicRetyped(cs []ops.ColumnChange) []runner.ColumnChange {
	out := make([]runner.ColumnChange, len(cs))
	for i, c := range cs {
		out[i] = runner.ColumnChange(c)
	}
	return out
}

// publicUpstream is runner's copy of a plan's upstreams (until plan moves
// onto runner, issue 46).
func publicUpstream(ups []run.UpstreamChange) []runner.UpstreamChange {
	out := make([]runner.UpstreamChange, len(ups))
	for i, u := range ups {
		out[i] = runner.UpstreamChange(u)
	}
	return out
}
