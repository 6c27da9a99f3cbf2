package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

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
	// Hook, when set, makes the hook called after a command committed
	// snapshots of a job (run, promote, erase, rollback, expire), as
	// runner calls an AfterCommit hook, committed or not (a publisher
	// catches up what an earlier command left): the seam an extension
	// built on runner uses. It is made once per command with the
	// command's writers (what it prints on stdout follows the command's
	// result) and its IDEM_FAULT hook (nil when unset), which gives the
	// fault hook of a write of the database at dbPath. Its error does not
	// undo the commit (the next command or `publish JOB` catches up): idem
	// run, promote and erase report it as an error and exit with its code
	// (at least 1), so an unattended caller sees that the lake is behind;
	// the other commands warn. A binary with a Hook publishes: the idem
	// binary, without one, warns that a job declaring [publish.iceberg]
	// was not published, and refuses to erase its rows.
	Hook func(stdout, stderr io.Writer, faultHook func(dbPath string) func(string)) runner.AfterCommit
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

// publishFailed reports that publishing job name (of job file file)
// failed after a commit that stands: the process exits with err's code
// once the command is done.
func (a *app) publishFailed(name, file string, err error) {
	fmt.Fprintf(a.stderr, "%s: error: %s: the commit stands but publishing to Iceberg failed (the next run or %s publish %s catches up): %v\n", a.name(), name, a.name(), file, err)
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
// extension's Hook, made with out for its stdout (which the command
// prints after its result), or, in a binary without one, a hook that warns
// that a job declaring [publish.iceberg] was not published.
func (a *app) commitHooks(out io.Writer) []runner.Option {
	return a.hooks(out, false)
}

// runHooks are commitHooks for idem run, promote and erase, whose Hook
// failure is reported as an error: the process exits with its code once
// the command is done (a.publishErr).
func (a *app) runHooks(out io.Writer) []runner.Option {
	return a.hooks(out, true)
}

// hooks are commitHooks; with exits, a Hook's error is run's.
func (a *app) hooks(out io.Writer, exits bool) []runner.Option {
	opts := []runner.Option{runner.WithFaultHook(a.faultHook)}
	if a.ext.Hook == nil {
		return append(opts, runner.WithAfterCommit(func(ctx context.Context, p *runner.Project, c runner.Commit) error {
			info, err := p.Job(c.Job)
			if err != nil || info.Iceberg == nil || !c.Committed {
				return err
			}
			fmt.Fprintf(a.stderr, "idem: warning: %s declares [publish.iceberg] but this idem binary does not publish: the snapshot was not published to Iceberg; run idem-iceberg publish %s\n", info.Name, info.File)
			return nil
		}))
	}
	hook := a.ext.Hook(out, a.stderr, a.faultHook)
	return append(opts, runner.WithAfterCommit(func(ctx context.Context, p *runner.Project, c runner.Commit) error {
		err := hook(ctx, p, c)
		if err == nil || !exits {
			return err
		}
		file := c.Job
		if info, ierr := p.Job(c.Job); ierr == nil {
			file = info.File
		}
		a.publishFailed(c.Job, file, err)
		return nil
	}))
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
