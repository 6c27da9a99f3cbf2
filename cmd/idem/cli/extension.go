package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/idem-dev/idem/internal/job"
	"github.com/idem-dev/idem/internal/run"
	"github.com/idem-dev/idem/pipelines"
	"github.com/idem-dev/idem/runner"

	"github.com/spf13/cobra"
)

// Extension is what a binary built on this CLI adds to it: idem-iceberg
// (publish/iceberg, a Go module of its own so that the idem binary does not
// carry iceberg-go) adds its publisher. The idem binary runs with the zero
// Extension.
type Extension struct {
	// Name is the binary's name in messages; "idem" when empty.
	Name string
	// AfterCommit, when set, is called after a command committed snapshots
	// of job j (run, erase, rollback, expire), with the database still
	// open, to publish them. Its error does not undo the commit (the next
	// command or `publish JOB` catches up) but the command exits with the
	// error's code (at least 1), so an unattended caller sees that the
	// lake is behind. fault is the command's
	// IDEM_FAULT hook (nil when unset).
	AfterCommit func(ctx context.Context, db *run.DB, j *job.Job, fault func(string), stdout, stderr io.Writer) error
	// Hook, when set, is called after a command moved onto the public
	// API (runner) committed snapshots of a job, as runner calls an
	// AfterCommit hook: the seam an extension built on runner alone
	// uses, importing nothing from internal/. Its error is a warning, as
	// AfterCommit's. Its output goes to the writers it was built with.
	Hook runner.AfterCommit
	// Commands are added to the root command; faultHook gives the
	// IDEM_FAULT hook of a command writing the database at dbPath.
	Commands func(faultHook func(dbPath string) func(string)) []*cobra.Command
}

// MainWith is Main for a binary that extends the CLI with ext.
func MainWith(ctx context.Context, args []string, stdout, stderr io.Writer, ext Extension) int {
	return mainExt(ctx, args, stdout, stderr, os.Getenv, ext)
}

// RunWith is Run for a binary that extends the CLI with ext.
func RunWith(ext Extension) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	context.AfterFunc(ctx, stop)
	return MainWith(ctx, os.Args[1:], os.Stdout, os.Stderr, ext)
}

// LoadJob loads a job file as every command does: a path, or the name of a
// job among the job files of the working folder.
func LoadJob(path string) (*job.Job, error) { return loadJob(path) }

// Builtins are the built-in pipelines a job file may name.
var Builtins = pipelines.FS

// publishFailed reports that publishing job j failed after a commit that
// stands: the process exits with err's code once the command is done.
func (a *app) publishFailed(j *job.Job, err error) {
	fmt.Fprintf(a.stderr, "%s: error: %s: the commit stands but publishing to Iceberg failed (the next run or %s publish %s catches up): %v\n", a.name(), j.Name, a.name(), j.File, err)
	if a.publishErr == nil {
		a.publishErr = err
	}
}

func (a *app) name() string {
	if a.ext.Name != "" {
		return a.ext.Name
	}
	return "idem"
}

// Reported is the error an extension's command returns once it has
// reported its failure itself: the process exits with code.
func Reported(code int) error { return &codeError{code: code} }

// commitHooks are the runner options of a command that commits: the
// extension's Hook, and a hook that calls its AfterCommit (which wants the
// database open: it is opened again, with f's settings, for a job that
// declares [publish.iceberg]) or, in a binary without one, warns that the
// job was not published. What they print on stdout goes to out, which the
// command prints after its result.
func (a *app) commitHooks(f dbFlags, out io.Writer) []runner.Option {
	return a.hooks(f, out, false)
}

// runHooks are commitHooks for idem run, whose AfterCommit failure is
// reported as afterCommit reports it: an error, and the process exits
// with its code once the command is done (a.publishErr).
func (a *app) runHooks(f dbFlags, out io.Writer) []runner.Option {
	return a.hooks(f, out, true)
}

// hooks are commitHooks; with exits, the AfterCommit error is run's.
func (a *app) hooks(f dbFlags, out io.Writer, exits bool) []runner.Option {
	opts := []runner.Option{runner.WithFaultHook(a.faultHook), runner.WithAfterCommit(func(ctx context.Context, p *runner.Project, c runner.Commit) error {
		info, err := p.Job(c.Job)
		if err != nil || info.Iceberg == nil {
			return err
		}
		if a.ext.AfterCommit == nil {
			if c.Committed {
				fmt.Fprintf(a.stderr, "idem: warning: %s declares [publish.iceberg] but this idem binary does not publish: the snapshot was not published to Iceberg; run idem-iceberg publish %s\n", info.Name, info.File)
			}
			return nil
		}
		j, err := loadJob(info.File)
		if err != nil {
			return err
		}
		db, err := run.Open(ctx, info.Database, f.openOptions(j))
		if err != nil {
			return err
		}
		defer db.Close() // the publisher wrote to its catalog, not here
		err = a.ext.AfterCommit(ctx, db, j, a.faultHook(db.Path()), out, a.stderr)
		if err != nil && exits {
			a.publishFailed(j, err)
			return nil
		}
		return err
	})}
	if a.ext.Hook != nil {
		opts = append(opts, runner.WithAfterCommit(a.ext.Hook))
	}
	return opts
}

// hookFailed warns that an extension's hook failed after a commit that
// stands, as afterCommit does.
func (a *app) hookFailed(p *runner.Project, ae *runner.AfterCommitError) {
	file := ae.Job
	if p != nil {
		if info, err := p.Job(ae.Job); err == nil {
			file = info.File
		}
	}
	fmt.Fprintf(a.stderr, "%s: warning: %s: the commit stands but publishing to Iceberg failed (the next run or %s publish %s catches up): %v\n", a.name(), ae.Job, a.name(), file, ae.Err)
}

// openOptions merges the job's [duckdb] settings with the flags, for the
// database an Extension.AfterCommit is handed.
func (f *dbFlags) openOptions(j *job.Job) run.OpenOptions {
	var s job.DuckDBSettings
	if j != nil {
		s = j.DuckDB
	}
	if f.memoryLimit != "" {
		s.MemoryLimit = f.memoryLimit
	}
	if f.threads > 0 {
		s.Threads = f.threads
	}
	if f.tempDir != "" {
		s.TempDirectory = f.tempDir
	}
	return run.OpenOptions{DuckDB: s, Wait: f.wait}
}

// loadJob loads the job file at path, or, when path is a job's name and
// no such file exists, the job of that name among the job files of the
// working folder (a project folder): idem show daily.
func loadJob(path string) (*job.Job, error) {
	file, err := runner.JobFile(path)
	if err != nil {
		return nil, err
	}
	return run.LoadJob(file, pipelines.FS)
}
