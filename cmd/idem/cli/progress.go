package cli

import (
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/idem-dev/idem/runner"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"
	"golang.org/x/term"
)

// progressFlags is the --quiet flag of the commands that do long work.
type progressFlags struct {
	quiet bool
}

func (f *progressFlags) register(cmd *cobra.Command) {
	cmd.Flags().BoolVarP(&f.quiet, "quiet", "q", false, "print nothing but errors: no progress on stderr, no summary on stdout (--json still prints; the exit code tells)")
}

// silence sends a's stdout nowhere under --quiet, unless --json asks for
// the result: a quiet command prints only its errors.
func (f progressFlags) silence(a *app, jsonOut bool) {
	if f.quiet && !jsonOut {
		a.stdout = io.Discard
	}
}

// progress returns the hooks that draw progress on stderr: one line per
// step with its name, elapsed time and DuckDB's percentage of the statement
// it runs, and a byte bar while a file is hashed, retained or exported. They
// are silent (the zero Progress) when stderr is not a terminal or --quiet is
// set, so logs and pipes never see escape codes.
//
// IDEM_TIMINGS=1 prints, instead, one plain line per step as it ends
// ("timing run: check outcomes 12ms"), for measuring where a run's time
// goes.
func (a *app) progress(f progressFlags) runner.Progress {
	if os.Getenv("IDEM_TIMINGS") != "" {
		var mu sync.Mutex
		return runner.Progress{Timings: true, Step: func(name string) func(time.Duration) {
			return func(d time.Duration) {
				mu.Lock()
				defer mu.Unlock()
				fmt.Fprintf(a.stderr, "timing %s %s\n", name, d.Round(time.Microsecond))
			}
		}}
	}
	file, ok := a.stderr.(*os.File)
	if f.quiet || !ok || !term.IsTerminal(int(file.Fd())) {
		return runner.Progress{}
	}
	return newTermProgress(file).hooks()
}

// termProgress draws one bar at a time: the running step's spinner, or the
// byte bar of the file being read inside it.
type termProgress struct {
	w io.Writer

	mu       sync.Mutex
	step     *progressbar.ProgressBar
	bytes    *progressbar.ProgressBar
	stepName string
	label    string
	stopTick chan struct{}
}

func newTermProgress(w io.Writer) *termProgress { return &termProgress{w: w} }

func (t *termProgress) hooks() runner.Progress {
	return runner.Progress{Step: t.startStep, Percent: t.setPercent, Bytes: t.addBytes}
}

func (t *termProgress) startStep(name string) func(time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.stepName = name
	t.step = progressbar.NewOptions64(-1,
		progressbar.OptionSetWriter(t.w),
		progressbar.OptionSetDescription(fmt.Sprintf("%-16s", name)),
		progressbar.OptionSpinnerType(14),
		progressbar.OptionSetElapsedTime(true),
		progressbar.OptionSetSpinnerChangeInterval(0), // rendered by tick, paused under a byte bar
		progressbar.OptionThrottle(0),
		progressbar.OptionSetRenderBlankState(true),
		progressbar.OptionClearOnFinish(),
	)
	stop := make(chan struct{})
	t.stopTick = stop
	go t.tick(stop)
	return func(elapsed time.Duration) {
		close(stop)
		t.mu.Lock()
		defer t.mu.Unlock()
		t.clearBytes()
		if t.step != nil {
			_ = t.step.Clear()
			t.step = nil
		}
		fmt.Fprintf(t.w, "\r✓ %-16s %s\n", name, formatElapsed(elapsed))
	}
}

// setPercent shows how far DuckDB is through the step's running statement.
func (t *termProgress) setPercent(pct float64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.step != nil && t.bytes == nil {
		t.step.Describe(fmt.Sprintf("%-16s %3.0f%%", t.stepName, pct))
	}
}

// tick redraws the step's spinner and elapsed time while no byte bar shows.
func (t *termProgress) tick(stop chan struct{}) {
	tk := time.NewTicker(150 * time.Millisecond)
	defer tk.Stop()
	for {
		select {
		case <-stop:
			return
		case <-tk.C:
			t.mu.Lock()
			if t.step != nil && t.bytes == nil {
				_ = t.step.Add64(1)
			}
			t.mu.Unlock()
		}
	}
}

// addBytes shows bytes done of total (total <= 0: unknown) for label; the
// bar clears itself when done reaches total or the step ends.
func (t *termProgress) addBytes(label string, done, total int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.bytes == nil || t.label != label {
		t.clearBytes()
		if t.step != nil {
			_ = t.step.Clear()
		}
		t.label = label
		max := total
		if max <= 0 {
			max = -1 // total unknown (an export's output): bytes and a spinner
		}
		t.bytes = progressbar.NewOptions64(max,
			progressbar.OptionSetWriter(t.w),
			progressbar.OptionSetDescription(fmt.Sprintf("  %-14s", label)),
			progressbar.OptionShowBytes(true),
			progressbar.OptionShowCount(),
			progressbar.OptionShowTotalBytes(true),
			progressbar.OptionSetWidth(30),
			progressbar.OptionThrottle(100*time.Millisecond),
			progressbar.OptionSetElapsedTime(true),
			progressbar.OptionSetPredictTime(false),
			// No render goroutine of its own: with an unknown total it would
			// keep drawing after the bar is cleared.
			progressbar.OptionSetSpinnerChangeInterval(0),
			progressbar.OptionClearOnFinish(),
		)
	}
	_ = t.bytes.Set64(done)
	if total > 0 && done >= total {
		t.clearBytes()
	}
}

func (t *termProgress) clearBytes() {
	if t.bytes != nil {
		_ = t.bytes.Clear()
		_ = t.bytes.Exit()
		t.bytes = nil
		t.label = ""
	}
}

func formatElapsed(d time.Duration) string {
	if d < time.Second {
		return fmt.Sprintf("%d ms", d.Milliseconds())
	}
	return fmt.Sprintf("%.1f s", d.Seconds())
}
