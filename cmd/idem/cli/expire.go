package cli

import (
	"bytes"
	"fmt"

	"github.com/idem-dev/idem/internal/report"
	"github.com/idem-dev/idem/runner"

	"github.com/spf13/cobra"
)

func (a *app) newExpireCmd() *cobra.Command {
	var f dbFlags
	var keep int64
	var dryRun bool
	var epoch int64
	cmd := &cobra.Command{
		Use:   "expire JOB",
		Short: "Expire the snapshots older than the newest N: their history, outcomes and unneeded inputs",
		Long: `Expire the job's snapshots older than its newest N (--keep-snapshots N, or
[retention] keep_snapshots; a run of a job with [retention] does this after
each commit), in one transaction: the history rows visible only in expired
snapshots, the outcome rows of expired batches, their release packets, and
the retained inputs no kept snapshot's rerun needs and no other job names.
The ledger, the snapshot rows, the run log, tombstones and erasures stay:
an expired batch id is still already_committed, and its content under a
new id cannot bring anything back. Export, diff, rerun, rollback and show
of an expired snapshot are refused (exit 3). A snapshot that a downstream
apply job's next read of changes starts from is kept, and so is every
snapshot the rerun of a kept snapshot of a downstream job reads (after its
checkpoint, for an apply job): each such pin is printed as "held by".
--dry-run reports what would be removed and changes nothing. A job with [job] fencing =
"required" refuses an expiry without its current --epoch (exit 3), as
run, erase and rollback do.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var hooked bytes.Buffer
			p, name, err := f.openOne(cmd.Context(), args[0], a.commitHooks(&hooked)...)
			if err != nil {
				return a.fail(f.jsonOut, err)
			}
			opts := runner.ExpireOptions{Keep: keep, DryRun: dryRun}
			if cmd.Flags().Changed("epoch") {
				opts.Epoch = &epoch
			}
			res, err := p.Expire(cmd.Context(), name, opts)
			return a.written(p, f.jsonOut, err, &hooked, func() error {
				if f.jsonOut {
					return a.printJSON(res)
				}
				a.printExpire(res)
				return nil
			})
		},
	}
	f.register(cmd)
	cmd.Flags().Int64Var(&keep, "keep-snapshots", 0, "keep the newest `N` snapshots (default: the job's [retention] keep_snapshots)")
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "report what would be expired and change nothing")
	cmd.Flags().Int64Var(&epoch, "epoch", 0, "refuse unless this is the job's current writer epoch (see idem fence)")
	return cmd
}

func (a *app) printExpire(res *runner.ExpireResult) {
	w := a.stdout
	verb := "expired"
	if res.DryRun {
		verb = "would expire"
	}
	switch {
	case res.Expired == 0 && res.Inputs == 0:
		fmt.Fprintf(w, "%s: nothing to expire (latest %d, oldest kept %d, keep %d)\n", res.Job, res.Latest, res.OldestKept, res.Keep)
	case res.Expired == 0:
		fmt.Fprintf(w, "%s: %s no snapshot; oldest kept %d\n", res.Job, verb, res.OldestKept)
	default:
		fmt.Fprintf(w, "%s: %s snapshots %d-%d\n", res.Job, verb, res.Previous, res.OldestKept-1)
	}
	fmt.Fprintf(w, "  oldest kept  %d (latest %d, keep %d)\n", res.OldestKept, res.Latest, res.Keep)
	for _, p := range res.Pins {
		fmt.Fprintf(w, "  held by      %s\n", p)
	}
	fmt.Fprintf(w, "  history      %s row(s)\n", report.Thousands(res.HistoryRows))
	fmt.Fprintf(w, "  outcomes     %s row(s)\n", report.Thousands(res.OutcomeRows))
	fmt.Fprintf(w, "  packets      %d\n", res.Packets)
	fmt.Fprintf(w, "  inputs       %d file(s), %s (reruns need inputs from snapshot %d)\n", res.Inputs, byteText(res.InputBytes), res.InputsFrom)
}

// byteText prints a byte count in binary units.
func byteText(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}
