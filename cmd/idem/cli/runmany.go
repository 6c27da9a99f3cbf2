package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/idem-dev/idem/internal/job"
	"github.com/idem-dev/idem/internal/ops"
	"github.com/idem-dev/idem/internal/run"
	"github.com/idem-dev/idem/runner"

	"github.com/spf13/cobra"
)

// This file is the path of idem run that does not go through runner yet
// (issue 46): a job reading a stream, a project holding one or given a
// stream flag, and the jobs an environment builds (env.go).

// runLegacy is idem run on the old path: loaded jobs, each run here.
func (a *app) runLegacy(cmd *cobra.Command, args []string, rf runFlags) error {
	f, pf, bf, pj, sf := rf.f, rf.pf, rf.bf, rf.pj, rf.sf
	one := func(a *app, j *job.Job, opts run.RunOptions) error {
		// In a project, --full-refresh rebuilds its models, refresh
		// jobs and seeds; its other apply jobs run as they would.
		opts.FullRefresh = rf.fullRefresh && (run.FullRefreshes(j) || !pj.isProject(args))
		opts.Fault, opts.Progress, opts.Expire = a.faultHookUntil(cmd.Context().Done(), f.path(j)), a.progress(pf), ops.ExpireAfterRun
		if j.IsStream() {
			return a.runStream(cmd, j, f, opts, sf) // stream.go
		}
		if err := sf.check(false, j.Name); err != nil {
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
	if j.Input.Mode == job.InputModeFiles || j.Input.ChunkRows > 0 {
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
	res, err := db.Run(cmd.Context(), j, opts)
	if err != nil {
		return a.fail(f.jsonOut, errors.Join(err, done(err)))
	}
	if f.jsonOut {
		if err := a.printJSON(res); err != nil {
			return errors.Join(err, done(nil))
		}
	} else {
		a.printResult(publicResult(res))
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

// publicResult is runner's copy of r, for the printer the paths share.
func publicResult(r *run.Result) *runner.Result {
	var out runner.Result
	if b, err := json.Marshal(r); err == nil {
		_ = json.Unmarshal(b, &out)
	}
	return &out
}

// runMany runs a job that applies several batches in one invocation: a
// directory source (mode = "files") or a chunked backfill. Each batch is
// its own transaction; the batches applied before a failure stay committed
// and are reported with the error.
func (a *app) runMany(cmd *cobra.Command, j *job.Job, db *run.DB, opts run.RunOptions, jsonOut bool) error {
	var out any
	var runs []*run.Result
	var decision, summary string
	var err error
	if j.Input.Mode == job.InputModeFiles {
		var res *run.FilesResult
		res, err = db.RunFiles(cmd.Context(), j, opts)
		if res != nil {
			out, runs, decision = res, res.Runs, res.Decision
			summary = fmt.Sprintf("%d new file(s)", len(res.NewFiles))
		}
	} else {
		var res *run.ChunksResult
		res, err = db.RunChunks(cmd.Context(), j, opts)
		if res != nil {
			out, runs, decision = res, res.Runs, res.Decision
			summary = fmt.Sprintf("%d chunk(s)", len(res.Runs))
			if res.Watermark != nil {
				summary += fmt.Sprintf(", watermark %d", *res.Watermark)
			}
		}
	}
	if err != nil {
		if out == nil || len(runs) == 0 {
			return a.fail(jsonOut, err)
		}
		if jsonOut {
			// The batches committed before the failure stay committed:
			// one object with them and the error.
			if perr := a.printJSON(manyFailed(out, err)); perr != nil {
				return perr
			}
			fmt.Fprintf(a.stderr, "idem: %v\n", err)
			return &codeError{code: job.ExitCode(err)}
		}
		for _, r := range runs {
			a.printResult(publicResult(r))
		}
		return a.fail(jsonOut, err)
	}
	if jsonOut {
		return a.printJSON(out)
	}
	for _, r := range runs {
		a.printResult(publicResult(r))
	}
	if decision == job.DecisionSkipped {
		fmt.Fprintf(a.stdout, "%s: skipped: nothing new (%s)\n", j.Name, strings.TrimSpace(summary))
		return nil
	}
	fmt.Fprintf(a.stdout, "%s: %s %s\n", j.Name, decision, summary)
	return nil
}

// manyFailed is the --json object of a files-mode or chunked run that
// failed after committing batches: the result's keys, decision failed or
// refused, runs the batches committed, and the error object's keys.
func manyFailed(out any, err error) any {
	code := job.ExitCode(err)
	decision := job.DecisionFailed
	if code == job.ExitRefused {
		decision = job.DecisionRefused
	}
	type failure struct {
		Error    string `json:"error"`
		ExitCode int    `json:"exit_code"`
	}
	f := failure{Error: err.Error(), ExitCode: code}
	switch r := out.(type) {
	case *run.FilesResult:
		r.Decision = decision
		return struct {
			*run.FilesResult
			failure
		}{r, f}
	case *run.ChunksResult:
		r.Decision = decision
		return struct {
			*run.ChunksResult
			failure
		}{r, f}
	}
	return f
}
