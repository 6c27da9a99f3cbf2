package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/idem-dev/idem/internal/report"
	"github.com/idem-dev/idem/runner"

	"github.com/spf13/cobra"
)

// streamFlags are run's flags for a job reading a stream.
type streamFlags struct {
	follow     bool
	maxBatches int
	idleExit   time.Duration
	allowGap   bool
}

func (sf *streamFlags) register(cmd *cobra.Command) {
	cmd.Flags().BoolVar(&sf.follow, "follow", false, "stream job: keep applying batches until SIGINT/SIGTERM, --max-batches or --idle-exit")
	cmd.Flags().IntVar(&sf.maxBatches, "max-batches", 0, "with --follow: stop after `N` committed batches")
	cmd.Flags().DurationVar(&sf.idleExit, "idle-exit", 0, "with --follow: stop after `D` without a record (e.g. 30s)")
	cmd.Flags().BoolVar(&sf.allowGap, "allow-gap", false, "stream job: accept records the source deleted before they were read, and log the gap")
}

// batchPrinter prints each batch of a stream job as it commits: a line
// (the batch's result first when not following), or with --json an
// object; and a follow run's yield. Buffered (a project that runs several
// jobs at once, or prints one --json array), each job's output is kept
// until the job's turn comes (take).
type batchPrinter struct {
	a        *app
	sf       streamFlags
	jsonOut  bool
	buffered bool
	mu       sync.Mutex
	bufs     map[string]*bytes.Buffer
}

// option is the stream flags as a runner option printing through bp.
func (bp *batchPrinter) option() runner.Option {
	return runner.WithStream(runner.StreamOptions{Follow: bp.sf.follow, MaxBatches: bp.sf.maxBatches, IdleExit: bp.sf.idleExit,
		AllowGap: bp.sf.allowGap, OnBatch: bp.batch, OnYield: bp.yield})
}

// out is where job's output goes, called under bp.mu.
func (bp *batchPrinter) out(job string) *app {
	if !bp.buffered {
		return bp.a
	}
	if bp.bufs == nil {
		bp.bufs = map[string]*bytes.Buffer{}
	}
	if bp.bufs[job] == nil {
		bp.bufs[job] = &bytes.Buffer{}
	}
	return &app{stdout: bp.bufs[job], stderr: bp.a.stderr, getenv: bp.a.getenv}
}

func (bp *batchPrinter) batch(b *runner.StreamBatch) {
	bp.mu.Lock()
	defer bp.mu.Unlock()
	a := bp.out(b.Job)
	if bp.jsonOut {
		_ = a.printJSON(b)
		return
	}
	if !bp.sf.follow && b.Run != nil {
		a.printResult(b.Run)
	}
	a.printBatch(b)
}

func (bp *batchPrinter) yield(job string, took time.Duration) {
	if bp.jsonOut {
		return
	}
	bp.mu.Lock()
	defer bp.mu.Unlock()
	fmt.Fprintf(bp.out(job).stdout, "%s: let a waiting command have the database for %s\n", job, took.Round(time.Millisecond))
}

// take returns what was kept of job's output, and forgets it.
func (bp *batchPrinter) take(job string) []byte {
	bp.mu.Lock()
	defer bp.mu.Unlock()
	b := bp.bufs[job]
	delete(bp.bufs, job)
	if b == nil {
		return nil
	}
	return b.Bytes()
}

// streamObject is a stream job's object in a project's --json array: its
// batch's object, an array of them when it applied several (--follow),
// or its Result when it applied none.
func streamObject(batches []byte, r *runner.Result) json.RawMessage {
	lines := bytes.Split(bytes.TrimSpace(batches), []byte("\n"))
	switch {
	case len(batches) == 0:
		return rawJSON(r)
	case len(lines) == 1:
		return lines[0]
	}
	return append(append([]byte("["), bytes.Join(lines, []byte(","))...), ']')
}

// printBatch prints one line per batch: what it read, the rate, and the
// lag of each partition.
func (a *app) printBatch(sr *runner.StreamBatch) {
	if sr.Decision == runner.DecisionSkipped {
		fmt.Fprintf(a.stdout, "%s: skipped: nothing new past the committed positions%s\n", sr.Job, lagText(sr.Lag))
		return
	}
	fmt.Fprintf(a.stdout, "%s: %s %s · snapshot %d · %s records", sr.Job, sr.Decision, escapeCell(sr.BatchID), sr.Snapshot, report.Thousands(int64(sr.Records)))
	if sr.Replayed > 0 {
		fmt.Fprintf(a.stdout, " (%s replayed, skipped)", report.Thousands(int64(sr.Replayed)))
	}
	fmt.Fprintf(a.stdout, " · %s records/s%s\n", report.Thousands(int64(sr.RecordsPerSec)), lagText(sr.Lag))
	if sr.Gap != "" {
		fmt.Fprintf(a.stdout, "  %s\n", sr.Gap)
	}
	if n := sr.RejectNote(); n != "" {
		fmt.Fprintf(a.stdout, "  %s\n", n)
	}
}

// lagText reads " · lag 0:0 1:12 2:0", partitions in numeric order.
func lagText(lag map[string]int64) string {
	if len(lag) == 0 {
		return ""
	}
	parts := make([]string, 0, len(lag))
	for p := range lag {
		parts = append(parts, p)
	}
	slices.SortFunc(parts, func(x, y string) int {
		a, errA := strconv.Atoi(x)
		b, errB := strconv.Atoi(y)
		if errA == nil && errB == nil {
			return a - b
		}
		return strings.Compare(x, y)
	})
	for i, p := range parts {
		parts[i] = fmt.Sprintf("%s:%d", p, lag[p])
	}
	return " · lag " + strings.Join(parts, " ")
}
