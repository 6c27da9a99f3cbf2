package cli

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/idem-dev/idem/internal/job"
	"github.com/idem-dev/idem/internal/run"

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

// check refuses the stream flags on a job that reads no stream, and the
// follow limits without --follow.
func (sf *streamFlags) check(stream bool, name string) error {
	if !stream && (sf.follow || sf.allowGap) {
		return job.Usage("--follow and --allow-gap apply to a job reading a stream ([input] kind = \"kafka\"); %s reads files", name)
	}
	if !sf.follow && (sf.maxBatches != 0 || sf.idleExit != 0) {
		return job.Usage("--max-batches and --idle-exit go with --follow")
	}
	if sf.maxBatches < 0 || sf.idleExit < 0 {
		return job.Usage("--max-batches and --idle-exit must not be negative")
	}
	return nil
}

// runStream runs a stream job: one batch, or with --follow batch after
// batch, each printed as it commits.
func (a *app) runStream(cmd *cobra.Command, j *job.Job, f dbFlags, opts run.RunOptions, sf streamFlags) error {
	if err := sf.check(j.IsStream(), j.Name); err != nil {
		return a.fail(f.jsonOut, err)
	}
	dbPath, err := f.dbPath(j)
	if err != nil {
		return a.fail(f.jsonOut, err)
	}
	db, done, err := a.openDB(cmd.Context(), dbPath, f.openOptions(j))
	if err != nil {
		return a.fail(f.jsonOut, err)
	}
	so := run.StreamOptions{AllowGap: sf.allowGap, Follow: sf.follow, MaxBatches: sf.maxBatches, IdleExit: sf.idleExit,
		OnBatch: func(sr *run.StreamResult) {
			if f.jsonOut {
				_ = a.printJSON(sr)
				return
			}
			if !sf.follow && sr.Run != nil {
				a.printResult(publicResult(sr.Run))
			}
			a.printBatch(sr)
		},
		OnYield: func(took time.Duration) {
			if !f.jsonOut {
				fmt.Fprintf(a.stdout, "%s: let a waiting command have the database for %s\n", j.Name, took.Round(time.Millisecond))
			}
		}}
	_, err = db.RunStream(cmd.Context(), j, opts, so)
	a.afterCommit(cmd.Context(), db, j, true) // extension.go
	closeErr := done(err)
	if err != nil {
		return a.fail(f.jsonOut, errors.Join(err, closeErr))
	}
	return a.closeFailed(closeErr)
}

// given says a stream flag was given.
func (sf *streamFlags) given() bool {
	return sf.follow || sf.allowGap || sf.maxBatches != 0 || sf.idleExit != 0
}

// printBatch prints one line per batch: what it read, the rate, and the
// lag of each partition.
func (a *app) printBatch(sr *run.StreamResult) {
	if sr.Decision == job.DecisionSkipped {
		fmt.Fprintf(a.stdout, "%s: skipped: nothing new past the committed positions%s\n", sr.Job, lagText(sr.Lag))
		return
	}
	fmt.Fprintf(a.stdout, "%s: %s %s · snapshot %d · %s records", sr.Job, sr.Decision, escapeCell(sr.BatchID), sr.Snapshot, job.Thousands(int64(sr.Records)))
	if sr.Replayed > 0 {
		fmt.Fprintf(a.stdout, " (%s replayed, skipped)", job.Thousands(int64(sr.Replayed)))
	}
	fmt.Fprintf(a.stdout, " · %s records/s%s\n", job.Thousands(int64(sr.RecordsPerSec)), lagText(sr.Lag))
	if sr.Gap != "" {
		fmt.Fprintf(a.stdout, "  %s\n", sr.Gap)
	}
	if n := run.RejectNote(sr.Rejected); n != "" {
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
