package cli

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

// Run is the whole idem process: it runs the command line os.Args with the
// process's standard output and error, and returns the exit code. The
// first Ctrl-C (or SIGTERM) cancels the context, which interrupts DuckDB
// and rolls the run back; once that has happened, signals get their
// default action again, so a second Ctrl-C ends the process at once.
func Run() int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	context.AfterFunc(ctx, stop)
	return Main(ctx, os.Args[1:], os.Stdout, os.Stderr)
}
