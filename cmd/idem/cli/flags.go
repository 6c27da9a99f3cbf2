package cli

import (
	"github.com/spf13/cobra"

	"github.com/idem-dev/idem/internal/report"
	"github.com/idem-dev/idem/runner"
)

// checkFlags refuses, for every command, the values of the shared flags
// that no run could use, before anything is opened: a negative --wait, a
// --memory-limit DuckDB would not parse, --jobs below 1, an --env given
// with a name no environment can have (an empty one too: a command would
// otherwise take it for no --env and work on production). Each is a usage
// error (exit 2) naming the flag.
func (a *app) checkFlags(cmd *cobra.Command) error {
	fl := cmd.Flags()
	var err error
	if w, e := fl.GetDuration("wait"); e == nil && w < 0 {
		err = report.Usage("--wait %s: must not be negative", w)
	}
	if m, e := fl.GetString("memory-limit"); err == nil && e == nil && fl.Changed("memory-limit") {
		if e := runner.CheckMemoryLimit(m); e != nil {
			err = report.Usage("--memory-limit: %v", e)
		}
	}
	if n, e := fl.GetInt("jobs"); err == nil && e == nil && n < 1 {
		err = report.Usage("--jobs %d: want 1 or more", n)
	}
	if name, e := fl.GetString("env"); err == nil && e == nil && fl.Changed("env") {
		err = runner.CheckEnvName(name)
	}
	if err == nil {
		return nil
	}
	jsonOut, _ := fl.GetBool("json")
	return a.fail(jsonOut, err)
}

// batchFlags are the flags of run and plan that name one batch of one job
// and guard it. batch turns them into the run's Batch: one function
// for both commands, so a flag is checked the same way by each.
type batchFlags struct {
	input, batchID string
	from, to       int64
	writer         writerFlags
	partitions     []string
}

// register adds --input, --batch-id, --from, --to, --epoch,
// --expect-parent and --partitions; batchHelp, fromHelp, toHelp and
// partitionsHelp are the command's own words for them.
func (b *batchFlags) register(cmd *cobra.Command, batchHelp, fromHelp, toHelp, partitionsHelp string) {
	cmd.Flags().StringVar(&b.input, "input", "", "input path or glob (overrides [input] path)")
	cmd.Flags().StringVar(&b.batchID, "batch-id", "", batchHelp)
	cmd.Flags().Int64Var(&b.from, "from", 0, fromHelp)
	cmd.Flags().Int64Var(&b.to, "to", 0, toHelp)
	b.writer.register(cmd)
	cmd.Flags().StringSliceVar(&b.partitions, "partitions", nil, partitionsHelp)
}

// batch checks the batch flags and returns the runner.Batch of one run.
// A --from without --to (or the reverse) and a --batch-id given but empty
// are usage errors.
func (b *batchFlags) batch(cmd *cobra.Command) (runner.Batch, error) {
	fl := cmd.Flags()
	out := runner.Batch{Input: b.input, ID: b.batchID}
	if fl.Changed("batch-id") && b.batchID == "" {
		return out, report.Usage("--batch-id is empty: give a batch id, or leave the flag out to name the batch after its input file")
	}
	if fl.Changed("from") || fl.Changed("to") {
		if !fl.Changed("from") || !fl.Changed("to") {
			return out, report.Usage("--from and --to go together")
		}
		from, to := b.from, b.to
		out.From, out.To = &from, &to
	}
	out.ExpectParent, out.Epoch = b.writer.guards(cmd)
	if fl.Changed("partitions") {
		out.Partitions = append([]string{}, b.partitions...)
	}
	return out, nil
}
