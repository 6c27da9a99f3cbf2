package cli

import (
	"bytes"
	"context"
	"errors"

	"github.com/idem-dev/idem/runner"
)

// options are the runner options the database flags ask for; --threads,
// --memory-limit and --wait left at their defaults keep the job file's.
func (f *dbFlags) options(extra ...runner.Option) []runner.Option {
	var opts []runner.Option
	if f.db != "" {
		opts = append(opts, runner.WithDatabase(f.db))
	}
	if f.wait > 0 {
		opts = append(opts, runner.WithWait(f.wait))
	}
	if f.memoryLimit != "" {
		opts = append(opts, runner.WithMemoryLimit(f.memoryLimit))
	}
	if f.threads > 0 {
		opts = append(opts, runner.WithThreads(f.threads))
	}
	if f.tempDir != "" {
		opts = append(opts, runner.WithTempDirectory(f.tempDir))
	}
	return append(opts, extra...)
}

// openOne opens the one job a command names, a job file or a job's name
// (runner.JobFile), as a project of that job; name is the job's name.
func (f *dbFlags) openOne(ctx context.Context, pathOrName string, extra ...runner.Option) (p *runner.Project, name string, err error) {
	file, err := runner.JobFile(pathOrName)
	if err != nil {
		return nil, "", err
	}
	if p, err = runner.Open(ctx, []string{file}, f.options(extra...)...); err != nil {
		return nil, "", err
	}
	return p, p.Jobs()[0], nil
}

// progressOption is a's progress hooks (progress.go) as a runner option.
func (a *app) progressOption(pf progressFlags) runner.Option {
	return runner.WithProgress(a.progress(pf))
}

// written reports the outcome of a call that commits: err, or its
// result, printed by print and followed by hooked, what its AfterCommit
// hooks printed (nil: none). A *runner.CloseError is reported after the
// result as closeFailed reports one (the commit stands, exit 1), a
// *runner.AfterCommitError as a warning (exit 0): runner returns the
// result beside either; any other error as fail does.
func (a *app) written(p *runner.Project, jsonOut bool, err error, hooked *bytes.Buffer, print func() error) error {
	var ce *runner.CloseError
	var ae *runner.AfterCommitError
	if err != nil && !errors.As(err, &ce) && !errors.As(err, &ae) {
		return a.fail(jsonOut, err)
	}
	if perr := print(); perr != nil {
		return perr
	}
	if hooked != nil {
		if _, perr := a.stdout.Write(hooked.Bytes()); perr != nil {
			return perr
		}
	}
	switch {
	case ce != nil:
		return a.closeFailed(ce)
	case ae != nil:
		a.hookFailed(p, ae)
	}
	return nil
}

// databaseOptions are the runner options of a command on a database file
// rather than a job (backup, compact).
func (f *dbFlags) databaseOptions(a *app) []runner.Option {
	return f.options(runner.WithFaultHook(a.faultHook))
}
