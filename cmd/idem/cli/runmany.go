package cli

import (
	"fmt"
	"strings"

	"github.com/idem-dev/idem/internal/job"
	"github.com/idem-dev/idem/internal/run"

	"github.com/spf13/cobra"
)

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
			a.printResult(r)
		}
		return a.fail(jsonOut, err)
	}
	if jsonOut {
		return a.printJSON(out)
	}
	for _, r := range runs {
		a.printResult(r)
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
