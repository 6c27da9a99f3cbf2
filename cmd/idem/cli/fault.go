package cli

import (
	"fmt"
	"io"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/idem-dev/idem/runner"
)

// faultHook returns the fault-injection hook for IDEM_FAULT, or nil when the
// variable is unset: the hook is inert unless asked for. At the named point
// the process kills itself with SIGKILL, as a crash or an OOM kill would, so
// no deferred cleanup, rollback or close runs. The points are listed in
// docs/reliability.md. dbPath is the database the run writes; the
// checkpoint point watches it.
func (a *app) faultHook(dbPath string) func(string) {
	return a.faultHookUntil(nil, dbPath)
}

// faultHookUntil is faultHook whose block:<point> also lets go when
// canceled is closed (the command's context is done: SIGINT or SIGTERM).
func (a *app) faultHookUntil(canceled <-chan struct{}, dbPath string) func(string) {
	point := a.getenv("IDEM_FAULT")
	if point == "" {
		return nil
	}
	kill := func(where string) {
		fmt.Fprintf(a.faultOut(), "idem: IDEM_FAULT=%s: killing the process %s\n", point, where)
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {}
	}
	// block:<point> stops at the point until the process's standard input
	// is closed (or the command is canceled), holding whatever it holds
	// there: a test waits for the line below, checks what it wants while
	// the process is held, and closes the pipe. No clock is involved.
	if at, ok := strings.CutPrefix(point, "block:"); ok {
		if at == "" {
			fmt.Fprintf(a.faultOut(), "idem: IDEM_FAULT=%s: want block:<point>, e.g. block:before_commit; fault ignored\n", point)
			return nil
		}
		return func(p string) {
			if p != at {
				return
			}
			fmt.Fprintf(a.faultOut(), "idem: IDEM_FAULT=%s: blocked at %s until stdin is closed\n", point, p)
			eof := make(chan struct{})
			go func() {
				_, _ = io.Copy(io.Discard, os.Stdin)
				close(eof)
			}()
			why := "stdin closed"
			select {
			case <-eof:
			case <-canceled:
				why = "canceled"
			}
			fmt.Fprintf(a.faultOut(), "idem: IDEM_FAULT=%s: released (%s)\n", point, why)
		}
	}
	// panic:<point> panics at the point, as a bug in idem would: the
	// process must still end (exit 2, Go's stack on stderr) with its
	// transaction rolled back, not hang on a connection its transaction
	// holds.
	if at, ok := strings.CutPrefix(point, "panic:"); ok {
		return func(p string) {
			if p == at {
				panic(fmt.Sprintf("IDEM_FAULT=%s: panicking at %s", point, p))
			}
		}
	}
	// sleep:<point>:<duration> pauses at the point instead of killing,
	// holding the database as a long run does (tests of readers meanwhile).
	if rest, ok := strings.CutPrefix(point, "sleep:"); ok {
		i := strings.LastIndex(rest, ":")
		var delay time.Duration
		var err error
		if i > 0 {
			delay, err = time.ParseDuration(rest[i+1:])
		}
		if i <= 0 || err != nil || delay < 0 {
			fmt.Fprintf(a.faultOut(), "idem: IDEM_FAULT=%s: want sleep:<point>:<duration>, e.g. sleep:before_commit:5s; fault ignored\n", point)
			return nil
		}
		at := rest[:i]
		return func(p string) {
			if p == at {
				fmt.Fprintf(a.faultOut(), "idem: IDEM_FAULT=%s: pausing %s at %s\n", point, delay, p)
				time.Sleep(delay)
			}
		}
	}
	// settle kills while the CHECKPOINT of the commits a handle left in
	// the WAL runs (at its close, on an idle follower), as checkpoint does
	// below; after_settle once it returned.
	if point == runner.FaultSettle {
		return func(at string) {
			switch at {
			case runner.FaultSettle:
				go watchCheckpoint(dbPath, kill)
			case runner.FaultAfterSettle:
				kill("after the settling CHECKPOINT returned (it finished before the fault fired)")
			}
		}
	}
	// checkpoint and checkpoint:<duration> kill while a CHECKPOINT after
	// the commit runs, from a goroutine, since the checkpoint itself is one
	// call into DuckDB; when the commit is left in the WAL (settle.go),
	// at after_checkpoint, right after it.
	if point == runner.FaultCheckpoint || strings.HasPrefix(point, runner.FaultCheckpoint+":") {
		var delay time.Duration
		if d, ok := strings.CutPrefix(point, runner.FaultCheckpoint+":"); ok {
			var err error
			if delay, err = time.ParseDuration(d); err != nil || delay < 0 {
				fmt.Fprintf(a.faultOut(), "idem: IDEM_FAULT=%s: want checkpoint:<duration>, e.g. checkpoint:2ms; fault ignored\n", point)
				return nil
			}
		}
		return func(at string) {
			switch at {
			case runner.FaultCheckpoint:
				if delay > 0 {
					go func() {
						time.Sleep(delay)
						kill(fmt.Sprintf("%s after CHECKPOINT began", delay))
					}()
					return
				}
				go watchCheckpoint(dbPath, kill)
			case runner.FaultAfterCheckpoint:
				kill("after CHECKPOINT returned (it finished before the fault fired)")
			}
		}
	}
	return func(at string) {
		if at == point || (strings.HasSuffix(point, "*") && strings.HasPrefix(at, strings.TrimSuffix(point, "*"))) {
			kill("at " + at)
		}
	}
}

// watchCheckpoint calls kill as soon as the database file changes: the
// checkpoint has marked the WAL and started writing blocks into the file,
// and has not yet written the new header or removed the WAL (it takes tens
// of milliseconds on the built-in pipelines, so a 20µs poll lands inside).
func watchCheckpoint(dbPath string, kill func(string)) {
	type sig struct {
		size int64
		mod  time.Time
	}
	stat := func(p string) sig {
		st, err := os.Stat(p)
		if err != nil {
			return sig{}
		}
		return sig{st.Size(), st.ModTime()}
	}
	db0 := stat(dbPath)
	for stat(dbPath) == db0 {
		time.Sleep(20 * time.Microsecond)
	}
	kill("during CHECKPOINT (it has started writing the database file)")
}

// faultOut is where IDEM_FAULT's lines go: the process's stderr.
func (a *app) faultOut() io.Writer {
	if a.faultErr != nil {
		return a.faultErr
	}
	return a.stderr
}
