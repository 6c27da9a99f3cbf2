package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/idem-dev/idem/internal/report"
	"github.com/idem-dev/idem/runner"
)

// planEnv is idem plan --env NAME: what idem run --env NAME would build
// in each database of the project args name, and what it would read from
// production.
func (a *app) planEnv(cmd *cobra.Command, args []string, f dbFlags, pj projectFlags, name string) error {
	p, err := a.openEnvProject(cmd, args, f, pj, name)
	if err != nil {
		return a.fail(f.jsonOut, err)
	}
	envs, err := p.PlanEnvironment(cmd.Context(), name)
	if err != nil {
		return a.fail(f.jsonOut, err)
	}
	return a.printEnvs(envs, f.jsonOut)
}

// openEnvProject opens the project args name for a verb on environment
// name, as loadProject loads it: the name checked first.
func (a *app) openEnvProject(cmd *cobra.Command, args []string, f dbFlags, pj projectFlags, name string, extra ...runner.Option) (*runner.Project, error) {
	if err := runner.CheckEnvName(name); err != nil {
		return nil, err
	}
	if err := oneJobFlag(cmd); err != nil {
		return nil, err
	}
	p, err := runner.Open(cmd.Context(), args, append(f.options(extra...), pj.options(a)...)...)
	if err != nil {
		return nil, err
	}
	if len(p.Jobs()) == 0 {
		pj.pickedNone(a)
	}
	return p, nil
}

func (a *app) printEnvs(envs []*runner.Environment, jsonOut bool) error {
	if jsonOut {
		return a.printJSON(envs)
	}
	for _, env := range envs {
		fmt.Fprintf(a.stdout, "environment %s of %s: %s\n", env.Name, env.Database, runner.EnvPath(env.Database, env.Name))
		for _, e := range env.Jobs {
			if e.Build {
				fmt.Fprintf(a.stdout, "  build       %s (%s)\n", e.Job, e.Reason)
			} else {
				fmt.Fprintf(a.stdout, "  production  %s snapshot %d\n", e.Job, e.Production)
			}
		}
	}
	return nil
}

// runEnv builds environment name of the project args name through
// runner's RunEnvironment: each job it builds runs as idem run would, in
// <db>.envs/NAME.duckdb, reading the upstreams it does not build from
// production, attached read-only; the others are not run, and each job is
// printed in run order as it is done.
func (a *app) runEnv(cmd *cobra.Command, args []string, f dbFlags, pf progressFlags, pj projectFlags, name string) error {
	opts := append([]runner.Option{a.progressOption(pf), runner.WithoutSHA256(),
		runner.WithFaultHook(func(path string) func(string) { return a.faultHookUntil(cmd.Context().Done(), path) })}, a.benchOptions()...)
	p, err := a.openEnvProject(cmd, args, f, pj, name, opts...)
	if err != nil {
		return a.fail(f.jsonOut, err)
	}
	reads := map[string]string{}
	for _, job := range p.Jobs() {
		if info, err := p.Job(job); err == nil {
			reads[job] = info.Reads
		}
	}
	var objs []json.RawMessage
	worst := 0
	envs, err := p.RunEnvironment(cmd.Context(), name, func(e *runner.EnvJob, r *runner.Result, err error) {
		worst = max(worst, runner.ExitCode(err))
		switch {
		case !e.Build && f.jsonOut:
			objs = append(objs, rawJSON(map[string]any{"job": e.Job, "decision": "from_production", "environment": name, "snapshot": e.Production, "reason": e.Reason}))
		case !e.Build:
			fmt.Fprintf(a.stdout, "%s: %s\n", e.Job, e.Reason)
		case f.jsonOut:
			objs = append(objs, a.projectJSON(r, reads[e.Job], err))
		default:
			if r.Decision != runner.DecisionBlocked {
				fmt.Fprintf(a.stdout, "%s: built in environment %s (%s)\n", e.Job, name, e.Reason)
			}
			a.printProjectJob(r, reads[e.Job], err)
		}
	})
	var pe *runner.PartialError
	if err != nil && !errors.As(err, &pe) {
		// The environment could not be recorded.
		if f.jsonOut {
			_ = a.printJSON(nonNil(objs))
		}
		return a.fail(f.jsonOut, err)
	}
	for _, env := range envs {
		if !f.jsonOut && !pf.quiet {
			built := len(env.Built())
			fmt.Fprintf(a.stderr, "idem: environment %s: %d job(s) built, %d read from production (%s, %s); review with idem diff --env %s, promote with idem promote --env %s\n",
				name, built, len(env.Jobs)-built, runner.EnvPath(env.Database, name), byteText(env.Bytes), name, name)
		}
	}
	return a.projectDone(f.jsonOut, objs, err, worst)
}

// diffEnv compares every job environment name built with production's
// latest snapshot of it.
func (a *app) diffEnv(cmd *cobra.Command, args []string, f dbFlags, name string) error {
	p, err := a.openEnvProject(cmd, args, f, projectFlags{}, name)
	if err != nil {
		return a.fail(f.jsonOut, err)
	}
	diffs, err := p.DiffEnvironment(cmd.Context(), name)
	if err != nil {
		return a.fail(f.jsonOut, err)
	}
	if f.jsonOut {
		return a.printJSON(diffs)
	}
	for _, d := range diffs {
		from := fmt.Sprintf("production snapshot %d", d.From.Snapshot)
		if d.New {
			from = "production (no snapshot)"
		}
		fmt.Fprintf(a.stdout, "%s: %s -> environment %s snapshot %d (key %s; built: %s)\n", d.Job, from, d.Environment, d.To.Snapshot, strings.Join(d.Key, ", "), d.Reason)
		if len(d.Moved) > 0 {
			fmt.Fprintf(a.stdout, "  moved        production moved since the environment was built (%s): rebuild it with idem run --env %s before you review\n", strings.Join(d.Moved, ", "), d.Environment)
		}
		if len(d.Edited) > 0 {
			fmt.Fprintf(a.stdout, "  edited       the job's files changed since the environment was built (%s): these rows are not theirs and promote is refused; rebuild it with idem run --env %s\n", strings.Join(d.Edited, "; "), d.Environment)
		}
		fmt.Fprintf(a.stdout, "  production   %s  %d rows\n", d.From.SHA256, d.From.Rows)
		fmt.Fprintf(a.stdout, "  environment  %s  %d rows\n", d.To.SHA256, d.To.Rows)
		if cs := columnChangesText(d.ColumnsAdded, d.ColumnsRemoved, d.ColumnsRetyped); cs != "" {
			fmt.Fprintf(a.stdout, "  columns      %s (rows compared on the columns both have)\n", cs)
		}
		if d.Identical {
			fmt.Fprintln(a.stdout, "  identical rows")
			continue
		}
		printKeyCounts(a.stdout, 12, keyCounts{d.Added, d.Removed, d.Changed, d.AddedKeys, d.RemovedKeys, d.ChangedKeys}) // diff.go
		for _, n := range d.Numeric {
			if v, err := strconv.ParseFloat(n.MaxAbs, 64); err == nil && v == 0 {
				continue
			}
			fmt.Fprintf(a.stdout, "  %-12s sum of differences %s, largest %s\n", escapeCell(n.Column), n.Sum, n.MaxAbs)
		}
	}
	return nil
}

func (a *app) newPromoteCmd() *cobra.Command {
	var f dbFlags
	var name string
	var recompute bool
	cmd := &cobra.Command{
		Use:   "promote DIR... --env NAME",
		Short: "Commit what an environment built into production, as reviewed",
		Long: `Commit every job environment NAME built (idem run DIR --env NAME) into
production as its next snapshot, in run order, in one transaction per
database, pinned to the same upstream snapshots: a model's rows are copied
from the environment (with --recompute its SELECT runs again in
production), other jobs run again; each commits only if its rows have the
sha256 the environment showed (idem diff --env NAME), otherwise nothing is
committed (exit 3).

Refused (exit 3) when production moved since the environment was built: an
upstream the environment read from production has a newer snapshot, or a
job it built was run in production meanwhile; and when a job's files no
longer give the definition the environment was built from (its model's
SQL, a param, its schema version ...). Rebuild the environment and review
its diff again. A promote cut short (killed, failed) committed
nothing: run it again. Jobs already promoted are reported as
already_promoted. The environment is kept; idem env drop NAME removes it.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if name == "" {
				return a.fail(f.jsonOut, &report.UsageError{Msg: "promote needs --env NAME"})
			}
			if err := runner.CheckEnvName(name); err != nil {
				return a.fail(f.jsonOut, err)
			}
			var hooked bytes.Buffer
			p, err := runner.Open(cmd.Context(), args, f.options(a.runHooks(&hooked)...)...)
			if err != nil {
				return a.fail(f.jsonOut, err)
			}
			res, err := p.Promote(cmd.Context(), name, recompute)
			if res == nil {
				return a.fail(f.jsonOut, err)
			}
			if !f.jsonOut {
				for _, p := range res.Promoted {
					fmt.Fprintf(a.stdout, "%s: %s: snapshot %d from environment %s snapshot %d\n", p.Job, strings.ReplaceAll(p.Decision, "_", " "), p.Snapshot, name, p.EnvSnapshot)
					if p.SHA256 != "" {
						fmt.Fprintf(a.stdout, "  sha256    %s  %d rows\n", p.SHA256, p.Rows)
					}
					fmt.Fprintf(a.stdout, "  job key   %s\n", p.JobKey)
				}
			}
			var ce *runner.CloseError
			var ae *runner.AfterCommitError
			if err != nil && !errors.As(err, &ce) && !errors.As(err, &ae) {
				defer a.stdout.Write(hooked.Bytes()) // what the hooks of the databases promoted printed
				if f.jsonOut {
					code := runner.ExitCode(err)
					var je *runner.JobError
					if errors.As(err, &je) {
						err = je.Err
					}
					_ = a.printJSON(map[string]any{"promoted": res.Promoted, "error": err.Error(), "exit_code": code})
					fmt.Fprintf(a.stderr, "idem: %v\n", err)
					return &codeError{code: code}
				}
				return a.fail(false, err)
			}
			return a.written(p, f.jsonOut, err, &hooked, func() error {
				if f.jsonOut {
					return a.printJSON(res)
				}
				return nil
			})
		},
	}
	f.register(cmd)
	cmd.Flags().StringVar(&name, "env", "", "the environment to promote (idem run DIR --env NAME built it)")
	cmd.Flags().BoolVar(&recompute, "recompute", false, "run each model's SELECT again in production instead of copying the environment's rows; commit only if the bytes are equal (proves the environment)")
	return cmd
}

func (a *app) newEnvCmd() *cobra.Command {
	var f dbFlags
	cmd := &cobra.Command{
		Use:   "env",
		Short: "List or drop environments (idem run DIR --env NAME builds one)",
		Long: `An environment is a change built beside production: idem run DIR --env
NAME builds the jobs whose definition changed, and every job downstream of
them, in <db>.envs/NAME.duckdb, reading the jobs it did not rebuild from
production's committed snapshots (attached read-only, through the read
replica when production has one; their rows are not copied). idem diff
DIR --env NAME compares it with production; idem promote DIR --env NAME
commits it there.`,
	}
	list := &cobra.Command{
		Use:   "list DIR...",
		Short: "List the environments of a project's databases",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			p, err := runner.Open(cmd.Context(), args, f.options()...)
			if err != nil {
				return a.fail(f.jsonOut, err)
			}
			out, err := p.Environments()
			if err != nil {
				return a.fail(f.jsonOut, err)
			}
			if f.jsonOut {
				return a.printJSON(out)
			}
			for _, e := range out {
				state := "complete"
				if !e.Complete {
					state = "incomplete"
				}
				var names []string
				for _, b := range e.Built() {
					names = append(names, b.Job)
				}
				fmt.Fprintf(a.stdout, "%s  %s  built %s  %s (production %s)  builds %s\n", e.Name, e.Database, e.BuiltAt.Format("2006-01-02 15:04:05Z"), byteText(e.Bytes), byteText(e.Production), orNone(strings.Join(names, ", ")))
				if state != "complete" {
					fmt.Fprintf(a.stdout, "  %s\n", state)
				}
			}
			return nil
		},
	}
	drop := &cobra.Command{
		Use:   "drop NAME DIR...",
		Short: "Remove environment NAME of a project's databases",
		Args:  cobra.MinimumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			name := args[0]
			if err := runner.CheckEnvName(name); err != nil {
				return a.fail(f.jsonOut, err)
			}
			p, err := runner.Open(cmd.Context(), args[1:], f.options()...)
			if err != nil {
				return a.fail(f.jsonOut, err)
			}
			dropped, err := p.DropEnvironment(name)
			for _, db := range dropped {
				fmt.Fprintf(a.stdout, "dropped environment %s of %s\n", name, db)
			}
			if err != nil {
				return a.fail(f.jsonOut, err)
			}
			return nil
		},
	}
	for _, c := range []*cobra.Command{list, drop} {
		c.Flags().StringVar(&f.db, "db", "", "database file (overrides the job files' database)")
		c.Flags().BoolVar(&f.jsonOut, "json", false, "print JSON on stdout")
	}
	cmd.AddCommand(list, drop)
	return cmd
}

func orNone(s string) string {
	if s == "" {
		return "nothing"
	}
	return s
}
