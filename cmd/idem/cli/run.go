package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/idem-dev/idem/internal/report"
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

` + runner.SelectorHelp,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			pf.silence(a, f.jsonOut)
			if envName != "" {
				return a.runEnv(cmd, args, f, pf, pj, envName) // env.go
			}
			return a.run(cmd, args, runFlags{f: f, pf: pf, bf: bf, pj: pj, sf: sf, fullRefresh: fullRefresh})
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

func (a *app) printResult(res *runner.Result) {
	w := a.stdout
	what := string(res.Decision)
	switch {
	case res.Decision == runner.DecisionSkipped:
		what = "skipped: nothing changed"
	case res.FullRefresh && len(res.Changed) == 0 && !res.FirstLoad:
		what += " (full refresh)"
	case res.FirstLoad && res.Decision.Committed():
		what += " (first load)"
	case len(res.Changed) > 0:
		what += " [" + strings.Join(res.Changed, ", ") + " changed]"
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
		if res.Incremental == runner.IncrementalPartition {
			line += " (recomputed: their upstream rows changed)"
		}
		fmt.Fprintf(w, "  partitions %s\n", escapeCell(line))
	}
	if res.Incremental == runner.IncrementalKey {
		fmt.Fprintf(w, "  keys      %s recomputed (their upstream rows changed)\n", report.Thousands(res.Keys))
	}
	if res.IncrementalNote != "" {
		fmt.Fprintf(w, "  rebuilt   whole: %s\n", escapeCell(res.IncrementalNote))
	}
	fmt.Fprintf(w, "  rows in   %s\n", report.Thousands(res.RowsIn))
	fmt.Fprintf(w, "  rows      written %s · table %s %s\n", report.Thousands(res.RowsWritten), res.Target, report.Thousands(res.RowsOut))
	if res.Conflicts != nil && *res.Conflicts > 0 {
		fmt.Fprintf(w, "  conflicts %s (kept in %s with status conflict and NULL values; excluded from %s_active)\n",
			report.Thousands(*res.Conflicts), res.Target, res.Target)
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
	a.printReplica(res.Replica) // replica.go
}

// upstreamText reads "trips 4 → 5, zones 1".
func upstreamText(ups []runner.UpstreamChange) string {
	parts := make([]string, len(ups))
	for i, u := range ups {
		parts[i] = u.String()
	}
	return strings.Join(parts, ", ")
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
	return &codeError{code: runner.ExitFailure}
}

// runFlags are the flags of idem run.
type runFlags struct {
	f           dbFlags
	pf          progressFlags
	bf          batchFlags
	pj          projectFlags
	sf          streamFlags
	fullRefresh bool
}

// run is idem run of a job or a project through runner: one call, and
// the printer. A stream job's batches print as they commit.
func (a *app) run(cmd *cobra.Command, args []string, rf runFlags) error {
	f := rf.f
	if rf.pj.isProject(args) {
		return a.runProjectCmd(cmd, args, rf)
	}
	b, err := rf.bf.batch(cmd)
	if err != nil {
		return a.fail(f.jsonOut, err)
	}
	var hooked bytes.Buffer
	bp := &batchPrinter{a: a, sf: rf.sf, jsonOut: f.jsonOut}
	p, name, err := f.openOne(cmd.Context(), args[0], append(a.runOptions(cmd, rf, &hooked), bp.option())...)
	if err != nil {
		return a.fail(f.jsonOut, err)
	}
	info, err := p.Job(name)
	if err != nil {
		return a.fail(f.jsonOut, err)
	}
	b.FullRefresh = rf.fullRefresh
	res, err := p.RunJob(cmd.Context(), name, b)
	if info.Reads == runner.ReadsStream {
		// Its batches are printed: what the hooks printed follows them.
		if je := runFailure(err); je != nil {
			return a.fail(f.jsonOut, errors.Join(je, a.hooked(&hooked)))
		}
		return a.written(p, f.jsonOut, err, &hooked, func() error { return nil })
	}
	if je := runFailure(err); je != nil {
		// A files-mode or chunked run keeps the batches it committed
		// before it failed: they are printed with the error.
		if res == nil || len(res.Runs) == 0 {
			return a.fail(f.jsonOut, je)
		}
		if f.jsonOut {
			if perr := errors.Join(a.printJSON(runObject(res, info.Reads, je)), a.hooked(&hooked)); perr != nil {
				return perr
			}
			fmt.Fprintf(a.stderr, "idem: %v\n", je.Err)
			return &codeError{code: je.Code}
		}
		for _, r := range res.Runs {
			a.printResult(r)
		}
		return a.fail(f.jsonOut, errors.Join(je, a.hooked(&hooked)))
	}
	return a.written(p, f.jsonOut, err, &hooked, func() error {
		if f.jsonOut {
			return a.printJSON(runObject(res, info.Reads, nil))
		}
		a.printRun(res, info.Reads)
		return nil
	})
}

// hooked prints what the AfterCommit hooks printed.
func (a *app) hooked(out *bytes.Buffer) error {
	_, err := a.stdout.Write(out.Bytes())
	return err
}

// runOptions are the runner options of idem run: progress, IDEM_FAULT
// (a block: point also lets go when the command is canceled), no sha256
// read back, the AfterCommit hooks writing to hooked.
func (a *app) runOptions(cmd *cobra.Command, rf runFlags, hooked *bytes.Buffer) []runner.Option {
	opts := append(a.runHooks(hooked), a.progressOption(rf.pf), runner.WithoutSHA256(),
		runner.WithFaultHook(func(path string) func(string) { return a.faultHookUntil(cmd.Context().Done(), path) }))
	return append(opts, a.benchOptions()...)
}

// runFailure is the *runner.JobError of a run that failed; nil for a run
// that committed, even when its database then failed to close or a hook
// failed.
func runFailure(err error) *runner.JobError {
	var je *runner.JobError
	var ce *runner.CloseError
	if errors.As(err, &je) && !errors.As(je.Err, &ce) {
		return je
	}
	return nil
}

// printRun prints a run's result: a batch, or each batch of a files-mode
// or chunked run and a line for the whole.
func (a *app) printRun(res *runner.Result, reads string) {
	if reads != runner.ReadsFiles && reads != runner.ReadsChunks {
		a.printResult(res)
		return
	}
	for _, r := range res.Runs {
		a.printResult(r)
	}
	summary := fmt.Sprintf("%d new file(s)", len(res.NewFiles))
	if reads == runner.ReadsChunks {
		summary = fmt.Sprintf("%d chunk(s)", len(res.Runs))
		if res.Watermark != nil {
			summary += fmt.Sprintf(", watermark %d", *res.Watermark)
		}
	}
	if res.Decision == runner.DecisionSkipped {
		fmt.Fprintf(a.stdout, "%s: skipped: nothing new (%s)\n", res.Job, summary)
		return
	}
	fmt.Fprintf(a.stdout, "%s: %s %s\n", res.Job, res.Decision, summary)
}

// runObject is a run's --json object: the result of a batch, or the
// summary of a files-mode or chunked run (its batches in runs), with the
// error's keys when it failed after committing batches.
func runObject(res *runner.Result, reads string, je *runner.JobError) any {
	type failure struct {
		Error    string `json:"error"`
		ExitCode int    `json:"exit_code"`
	}
	decision := res.Decision
	var fail *failure
	if je != nil {
		decision = runner.DecisionFailed
		if je.Code == runner.ExitRefused {
			decision = runner.DecisionRefused
		}
		fail = &failure{Error: je.Err.Error(), ExitCode: je.Code}
	}
	switch reads {
	case runner.ReadsFiles:
		type files struct {
			Job      string           `json:"job"`
			Decision runner.Decision  `json:"decision"`
			NewFiles []string         `json:"new_files"`
			Runs     []*runner.Result `json:"runs"`
		}
		f := files{res.Job, decision, res.NewFiles, res.Runs}
		if fail != nil {
			return struct {
				files
				*failure
			}{f, fail}
		}
		return f
	case runner.ReadsChunks:
		type chunks struct {
			Job       string           `json:"job"`
			Decision  runner.Decision  `json:"decision"`
			Watermark *int64           `json:"watermark"`
			Runs      []*runner.Result `json:"runs"`
		}
		c := chunks{res.Job, decision, res.Watermark, res.Runs}
		if fail != nil {
			return struct {
				chunks
				*failure
			}{c, fail}
		}
		return c
	}
	return res
}

// runProjectCmd is idem run over a project: runner's Project.Run, each job
// printed as it is done, in run order; with --json one array, an object
// per job. The exit code is the worst met.
func (a *app) runProjectCmd(cmd *cobra.Command, args []string, rf runFlags) error {
	f, pj := rf.f, rf.pj
	if err := oneJobFlag(cmd); err != nil {
		return a.fail(f.jsonOut, err)
	}
	var hooked bytes.Buffer
	// With one job at a time and no --json, a stream job's batches print
	// as they commit; otherwise when the job's turn comes.
	bp := &batchPrinter{a: a, sf: rf.sf, jsonOut: f.jsonOut, buffered: f.jsonOut || pj.jobs != 1}
	opts := append(f.options(append(a.runOptions(cmd, rf, &hooked), bp.option())...), pj.options(a)...)
	if rf.fullRefresh {
		opts = append(opts, runner.WithFullRefresh())
	}
	reads := map[string]string{}
	var objs []json.RawMessage
	worst := 0
	opts = append(opts, runner.WithEachJob(func(r *runner.Result, err error) {
		worst = max(worst, runner.ExitCode(err))
		batches := bp.take(r.Job)
		if f.jsonOut {
			if reads[r.Job] == runner.ReadsStream && err == nil && r.Decision != runner.DecisionBlocked {
				objs = append(objs, streamObject(batches, r))
				return
			}
			objs = append(objs, a.projectJSON(r, reads[r.Job], err))
			return
		}
		a.stdout.Write(batches)
		a.printProjectJob(r, reads[r.Job], err)
	}))
	p, err := runner.Open(cmd.Context(), args, opts...)
	if err != nil {
		return a.fail(f.jsonOut, err)
	}
	if len(p.Jobs()) == 0 {
		pj.pickedNone(a)
	}
	for _, name := range p.Jobs() {
		if info, err := p.Job(name); err == nil {
			reads[name] = info.Reads
		}
	}
	_, err = p.Run(cmd.Context())
	var ae *runner.AfterCommitError
	if errors.As(err, &ae) {
		defer a.hookFailed(p, ae)
	}
	return a.projectDone(f.jsonOut, objs, err, worst, hooked.Bytes()...)
}

// printProjectJob prints a job of a project's run as it is done: blocked,
// failed (what it committed before, and the error), or its result. A
// stream job's batches were printed as they committed.
func (a *app) printProjectJob(r *runner.Result, reads string, err error) {
	switch {
	case r.Decision == runner.DecisionBlocked:
		fmt.Fprintf(a.stdout, "%s: blocked by %s (not run)\n", r.Job, strings.Join(r.BlockedBy, ", "))
	case err != nil:
		if reads != runner.ReadsStream {
			for _, run := range r.Runs {
				a.printResult(run)
			}
		}
		fmt.Fprintf(a.stderr, "idem: %v\n", errors.Unwrap(err))
	case reads != runner.ReadsStream:
		a.printRun(r, reads)
	}
}

// projectDone ends a project's run or plan: the --json array of objs,
// what the hooks printed, a database that failed to close (err, a
// *runner.PartialError, names it), and the worst exit code met.
func (a *app) projectDone(jsonOut bool, objs []json.RawMessage, err error, worst int, hooked ...byte) error {
	if jsonOut {
		if perr := a.printJSON(nonNil(objs)); perr != nil {
			return perr
		}
	}
	if _, perr := a.stdout.Write(hooked); perr != nil {
		return perr
	}
	var pe *runner.PartialError
	if errors.As(err, &pe) {
		for _, je := range pe.Failed {
			if je.Job == "" { // a database that failed to close
				fmt.Fprintf(a.stderr, "idem: %v\n", je.Err)
				worst = max(worst, je.Code)
			}
		}
	}
	if worst != 0 {
		return &codeError{code: worst}
	}
	return nil
}

// projectJSON is one job's object in a project's --json array: the single
// run's object, an error object with the job and its decision (failed or
// refused), or a blocked job.
func (a *app) projectJSON(r *runner.Result, reads string, err error) json.RawMessage {
	if r.Decision == runner.DecisionBlocked {
		b, _ := json.Marshal(map[string]any{"job": r.Job, "decision": "blocked", "blocked_by": r.BlockedBy})
		return b
	}
	var je *runner.JobError
	if !errors.As(err, &je) {
		return rawJSON(runObject(r, reads, nil))
	}
	fmt.Fprintf(a.stderr, "idem: %v\n", je.Err)
	var obj any = map[string]any{"error": je.Err.Error(), "exit_code": je.Code}
	if len(r.Runs) > 0 && reads != runner.ReadsStream {
		obj = runObject(r, reads, je)
	}
	return projectFailure(je, obj)
}

// projectFailure is the object of a job that failed or was refused in a
// project's --json array: obj (what the job alone prints with --json: its
// error object, a refused plan) with the job's name, its decision (failed
// or refused when obj has none) and exit code.
func projectFailure(je *runner.JobError, obj any) json.RawMessage {
	m := map[string]any{}
	_ = json.Unmarshal(rawJSON(obj), &m)
	m["job"] = je.Job
	if d, ok := m["decision"]; !ok || d == "" {
		m["decision"] = runner.DecisionFailed
		if je.Code == runner.ExitRefused {
			m["decision"] = runner.DecisionRefused
		}
	}
	if _, ok := m["exit_code"]; !ok {
		m["exit_code"] = je.Code
	}
	b, _ := json.Marshal(m)
	return b
}

// nonNil is objs, an empty array when nil.
func nonNil(objs []json.RawMessage) []json.RawMessage {
	if objs == nil {
		return []json.RawMessage{}
	}
	return objs
}

// rawJSON is v as printJSON writes it, without the newline.
func rawJSON(v any) json.RawMessage {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
	return bytes.TrimSpace(b.Bytes())
}
