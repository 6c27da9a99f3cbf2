package cli

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/idem-dev/idem/internal/job"
	"github.com/idem-dev/idem/internal/ops"
	"github.com/idem-dev/idem/internal/project"
	"github.com/idem-dev/idem/internal/run"
	"github.com/idem-dev/idem/runner"

	"github.com/spf13/cobra"
)

func (a *app) newRunCmd() *cobra.Command {
	var f dbFlags
	var pf progressFlags
	var bf batchFlags
	var pj projectFlags
	var sf streamFlags
	var envName string
	var fullRefresh bool
	cmd := &cobra.Command{
		Use:   "run JOB|DIR...",
		Short: "Run a job once: load or apply its input in one transaction, or skip",
		Long: `Run a job once. A refresh job reloads its target unless its job key
(input, transform, config, schema) is unchanged, in which case it is skipped.
An apply job applies one batch, identified by --batch-id (default: the input
file's base name); a batch already committed with the same content is
reported as already_committed, one with other content is refused (exit 3).

Everything the run writes (target, outcomes, ledger, snapshot, state) commits
in one DuckDB transaction, or nothing does.

Given several job files or a folder (every *.toml in it), run runs a project:
each job after the jobs it reads ([input] upstream), each in its own
transaction. A job downstream of one that failed or was refused is blocked
and not run; independent jobs still run; the exit code is the worst met.
--select and --exclude pick jobs (below); --json prints one array, an
object per job.

--full-refresh rebuilds a refresh job, a model or a seed ([input] mode =
"replace") from its inputs (its pinned upstream rows, its input file) as a
new snapshot even when nothing changed, and an incremental model whole,
as dbt's --full-refresh; idem rerun JOB then proves the snapshot. In a
project its other apply jobs run as they would; such a job alone is
refused (exit 2): its target is the fold of its batches.

A job reading a stream ([input] kind = "kafka") applies one batch of at
most max_records records past its committed positions; with --follow it
keeps applying batches until SIGINT/SIGTERM (the batch in flight commits or
rolls back whole, then exit 0), --max-batches or --idle-exit, printing a line
per batch (records/s, lag per partition), or with --json one object per batch
(JSON lines). A source gap (records deleted before they were read) is
refused (exit 3) unless --allow-gap.

` + project.SelectorHelp,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			pf.silence(a, f.jsonOut)
			if envName != "" {
				return a.runEnv(cmd, args, f, pf, pj, envName) // env.go
			}
			one := func(a *app, j *job.Job, opts run.RunOptions) error {
				// In a project, --full-refresh rebuilds its models, refresh
				// jobs and seeds; its other apply jobs run as they would.
				opts.FullRefresh = fullRefresh && (run.FullRefreshes(j) || !pj.isProject(args))
				opts.Fault, opts.Progress, opts.Expire = a.faultHookUntil(cmd.Context().Done(), f.path(j)), a.progress(pf), ops.ExpireAfterRun
				if j.IsStream() {
					return a.runStream(cmd, j, f, opts, sf) // stream.go
				}
				if err := sf.check(j); err != nil {
					return a.fail(f.jsonOut, err)
				}
				return a.runJob(cmd, j, f, opts)
			}
			if pj.isProject(args) {
				p, err := a.loadProject(cmd, args, pj)
				if err != nil {
					return a.fail(f.jsonOut, err)
				}
				opts, err := bf.runOptions(cmd)
				if err != nil {
					return a.fail(f.jsonOut, err)
				}
				return a.runProject(cmd.Context(), p, pj.jobs, f.jsonOut, func(sub *app, j *job.Job, _ map[string]string) (string, error) {
					return "", one(sub, j, opts)
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
			return one(a, j, opts)
		},
	}
	f.register(cmd)
	pf.register(cmd)
	pj.register(cmd, true)
	bf.register(cmd, "batch id of an apply run (default: the input file's base name)",
		"the batch covers source positions (from, to]; from must equal the job's cursor",
		"upper bound of the batch's source positions; the cursor after commit",
		"replace exactly these partitions of a job with [target] partition_by (comma-separated; an empty one included)")
	sf.register(cmd)
	cmd.Flags().BoolVar(&fullRefresh, "full-refresh", false, "rebuild each refresh job, model and seed from its inputs as a new snapshot even when its key is unchanged, an incremental model whole (idem rerun JOB proves the snapshot); another apply job alone is refused (exit 2)")
	cmd.Flags().StringVar(&envName, "env", "", "build environment `NAME` beside production (<db>.envs/NAME.duckdb): the jobs whose definition changed and their downstream, reading the rest from production; see idem env")
	return cmd
}

func (a *app) printResult(res *run.Result) {
	w := a.stdout
	what := res.Decision
	switch {
	case res.Decision == job.DecisionSkipped:
		what = "skipped: nothing changed"
	case res.FullRefresh && len(res.Changed) == 0 && !res.FirstLoad:
		what = res.Decision + " (full refresh)"
	case res.FirstLoad && (res.Decision == job.DecisionLoaded || res.Decision == job.DecisionApplied):
		what = res.Decision + " (first load)"
	case len(res.Changed) > 0:
		what = res.Decision + " [" + strings.Join(res.Changed, ", ") + " changed]"
	}
	fmt.Fprintf(w, "%s: %s\n", res.Job, what)
	if res.BatchID != "" {
		fmt.Fprintf(w, "  batch     %s\n", escapeCell(res.BatchID))
	}
	fmt.Fprintf(w, "  snapshot  %d\n", res.Snapshot)
	if len(res.Upstream) > 0 {
		fmt.Fprintf(w, "  upstream  %s\n", upstreamText(res.Upstream))
	}
	if len(res.Partitions) > 0 {
		line := strings.Join(res.Partitions, ", ")
		if len(res.Repaired) > 0 {
			line += " (moved keys removed from " + strings.Join(res.Repaired, ", ") + ")"
		}
		if res.Incremental == job.IncrementalPartition {
			line += " (recomputed: their upstream rows changed)"
		}
		fmt.Fprintf(w, "  partitions %s\n", escapeCell(line))
	}
	if res.Incremental == job.IncrementalKey {
		fmt.Fprintf(w, "  keys      %s recomputed (their upstream rows changed)\n", job.Thousands(res.Keys))
	}
	if res.IncrementalNote != "" {
		fmt.Fprintf(w, "  rebuilt   whole: %s\n", escapeCell(res.IncrementalNote))
	}
	fmt.Fprintf(w, "  rows in   %s\n", job.Thousands(res.RowsIn))
	fmt.Fprintf(w, "  rows      written %s · table %s %s\n", job.Thousands(res.RowsWritten), res.Target, job.Thousands(res.RowsOut))
	if res.Conflicts != nil && *res.Conflicts > 0 {
		fmt.Fprintf(w, "  conflicts %s (kept in %s with status conflict and NULL values; excluded from %s_active)\n",
			job.Thousands(*res.Conflicts), res.Target, res.Target)
	}
	if len(res.Outcomes) > 0 {
		names := make([]string, 0, len(res.Outcomes))
		for k := range res.Outcomes {
			names = append(names, k)
		}
		sort.Strings(names)
		parts := make([]string, len(names))
		for i, k := range names {
			parts[i] = fmt.Sprintf("%s %d", escapeCell(k), res.Outcomes[k])
		}
		fmt.Fprintf(w, "  outcomes  %s\n", strings.Join(parts, ", "))
	}
	for _, au := range res.Audits {
		if au.Violations > 0 {
			fmt.Fprintf(w, "  audit     %s (%s, %s): %d violation(s): %s\n", au.Name, au.Kind, au.Severity, au.Violations, strings.Join(au.Rows, "; "))
		}
	}
	if res.Note != "" {
		fmt.Fprintf(w, "  note      %s\n", res.Note)
	}
	if len(res.IgnoredColumns) > 0 {
		fmt.Fprintf(w, "  ignored   %s ([input] extra_columns = \"ignore\")\n", strings.Join(res.IgnoredColumns, ", "))
	}
	fmt.Fprintf(w, "  job key   %s\n", res.JobKey)
	if e := res.Expiry; e != nil && e.Error == "" && e.Expired > 0 {
		fmt.Fprintf(w, "  expired   %d snapshot(s) (oldest kept: %d)\n", e.Expired, e.OldestKept)
	}
	if e := res.Expiry; e != nil && e.Error != "" {
		fmt.Fprintf(a.stderr, "idem: warning: %s: the run committed; expiring old snapshots failed (the next run or idem expire retries): %s\n", res.Job, e.Error)
	}
	a.printReplica((*runner.ReplicaInfo)(res.Replica)) // replica.go
}

// upstreamText reads "trips 4 → 5, zones 1".
func upstreamText(ups []run.UpstreamChange) string {
	parts := make([]string, len(ups))
	for i, u := range ups {
		parts[i] = u.String()
	}
	return strings.Join(parts, ", ")
}

// runJob runs one loaded job as `idem run JOB` does and prints its result.
func (a *app) runJob(cmd *cobra.Command, j *job.Job, f dbFlags, opts run.RunOptions) error {
	dbPath, err := f.dbPath(j)
	if err != nil {
		return a.fail(f.jsonOut, err)
	}
	doneOpen := timing(opts.Progress, "open")
	db, done, err := a.openDB(cmd.Context(), dbPath, f.openOptions(j))
	doneOpen()
	if err != nil {
		return a.fail(f.jsonOut, err)
	}
	if (j.Input.Mode == job.InputModeFiles || j.Input.ChunkRows > 0) && !opts.FullRefresh {
		err := a.runMany(cmd, j, db, opts, f.jsonOut) // runmany.go
		a.afterCommit(cmd.Context(), db, j, true)
		if cerr := a.closeFailed(done(err)); err == nil {
			return cerr
		}
		return err
	}
	// The floor cmd/idem-bench measures history against; never set in
	// the idem that ships (benchhistory.go).
	opts.SkipHistory = a.benchNoHistory()
	res, err := ops.Run(cmd.Context(), db, j, opts) // an apply job's --full-refresh: ops.FullRefreshApply
	if err != nil {
		return a.fail(f.jsonOut, errors.Join(err, done(err)))
	}
	if f.jsonOut {
		if err := a.printJSON(res); err != nil {
			return errors.Join(err, done(nil))
		}
	} else {
		a.printResult(res)
	}
	a.afterCommit(cmd.Context(), db, j, committedDecision(res.Decision)) // extension.go
	doneClose := timing(opts.Progress, "close")
	err = done(nil)
	doneClose()
	return a.closeFailed(err)
}

// timing starts a step that only IDEM_TIMINGS prints (the open and close
// of a run's database, which draw no progress on a terminal).
func timing(p job.Progress, name string) func() {
	if !p.Timings {
		return func() {}
	}
	return p.Start(name)
}

// closeWritten closes db, a database the command opened for writing, once
// it has printed its result, and joins a failed close into *err as
// closeFailed reports it: the close checkpoints the last commit.
func (a *app) closeWritten(db *run.DB, err *error) {
	if cerr := db.Close(); cerr != nil {
		*err = errors.Join(*err, a.closeFailed(fmt.Errorf("close database %s: %w", db.Path(), cerr)))
	}
}

// closeFailed reports the error of closing a database written to after
// the command printed its result: what it committed stands (a commit the
// close could not checkpoint is in the WAL, replayed on the next open),
// and the command exits 1.
func (a *app) closeFailed(err error) error {
	if err == nil {
		return nil
	}
	fmt.Fprintf(a.stderr, "idem: %v\n", err)
	return &codeError{code: job.ExitFailure}
}
