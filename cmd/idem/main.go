// Command idem runs versioned SQL pipelines on an embedded DuckDB database
// so that re-running a pipeline is always safe.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	os.Exit(realMain())
}

// run is the whole process: the first Ctrl-C (or SIGTERM) cancels the
// context, which interrupts DuckDB and rolls the run back; once that has
// happened, signals get their default action again, so a second Ctrl-C ends
// the process at once.
func realMain() int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	context.AfterFunc(ctx, stop)
	return Main(ctx, os.Args[1:], os.Stdout, os.Stderr)
}
