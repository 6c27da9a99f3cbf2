package cli

import (
	"fmt"
	"maps"
	"slices"

	"github.com/idem-dev/idem/internal/job"
	"github.com/idem-dev/idem/internal/ops"

	"github.com/spf13/cobra"
)

func (a *app) newEraseCmd() *cobra.Command {
	var f dbFlags
	var w writerFlags
	var key string
	cmd := &cobra.Command{
		Use:   "erase JOB --key K",
		Short: "Remove a subject from the current rows, every snapshot and the retained inputs",
		Long: `Remove every row of key K, in one transaction: from the target, from its
history (so no snapshot export shows it), from <target>_outcomes and the
pipeline's other tables, and from the retained input files, which are
rewritten without K's rows and stored under their new sha256. The erasure
(key, highest position seen, snapshot, time; never the payload) is
recorded so that a later batch carrying K at or below that position gets
outcome erased. The erasure is a new snapshot. --expect-parent P and
--epoch E guard it as they guard a run: refused (exit 3) unless the latest
snapshot is P and the writer epoch is E.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) (err error) {
			if !cmd.Flags().Changed("key") {
				return a.fail(f.jsonOut, &job.UsageError{Msg: "erase needs --key K"})
			}
			job, db, err := f.openJob(cmd.Context(), args[0], false)
			if err != nil {
				return a.fail(f.jsonOut, err)
			}
			defer a.closeWritten(db, &err)
			opts := ops.EraseOptions{Key: key, Fault: a.faultHook(db.Path())}
			opts.ExpectParent, opts.Epoch = w.guards(cmd)
			res, err := ops.Erase(cmd.Context(), db, job, opts)
			if err != nil {
				return a.fail(f.jsonOut, err)
			}
			if f.jsonOut {
				return a.printJSON(res)
			}
			if res.AlreadyErased {
				fmt.Fprintf(a.stdout, "%s: key %q was already erased; nothing to do (snapshot %d)\n", res.Job, res.Key, res.Snapshot)
				return nil
			}
			pos := "none"
			if res.Position != nil {
				pos = fmt.Sprint(*res.Position)
			}
			fmt.Fprintf(a.stdout, "%s: erased key %q\n", res.Job, res.Key)
			fmt.Fprintf(a.stdout, "  snapshot  %d\n", res.Snapshot)
			fmt.Fprintf(a.stdout, "  position  %s (later events at or below it are dropped as erased)\n", pos)
			for _, t := range slices.Sorted(maps.Keys(res.Removed)) {
				fmt.Fprintf(a.stdout, "  removed   %d row(s) from %s\n", res.Removed[t], t)
			}
			for _, in := range res.Inputs {
				fmt.Fprintf(a.stdout, "  rewrote   input %s -> %s (%d row(s) removed)\n", in.Old[:12], in.New[:12], in.RowsRemoved)
			}
			a.printReplica(res.Replica)
			return nil
		},
	}
	f.register(cmd)
	w.register(cmd)
	cmd.Flags().StringVar(&key, "key", "", "the key value to erase")
	return cmd
}

func (a *app) newRollbackCmd() *cobra.Command {
	var f dbFlags
	var w writerFlags
	var to int64
	cmd := &cobra.Command{
		Use:   "rollback JOB --to-snapshot S",
		Short: "Make the current rows those of snapshot S, as a new snapshot",
		Long: `Make the job's current rows equal to the pinned rows of snapshot S and
commit them as a new snapshot. Refused (exit 3) if that would expose an
erased key ("rollback over an erasure") or cross a change of the target's
columns. The ledger, cursor and outcomes stay: batches already committed
are not applied again. --expect-parent P and --epoch E guard it as they
guard a run: refused (exit 3) unless the latest snapshot is P and the
writer epoch is E.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) (err error) {
			if !cmd.Flags().Changed("to-snapshot") {
				return a.fail(f.jsonOut, &job.UsageError{Msg: "rollback needs --to-snapshot S"})
			}
			job, db, err := f.openJob(cmd.Context(), args[0], false)
			if err != nil {
				return a.fail(f.jsonOut, err)
			}
			defer a.closeWritten(db, &err)
			opts := ops.RollbackOptions{Fault: a.faultHook(db.Path())}
			opts.ExpectParent, opts.Epoch = w.guards(cmd)
			res, err := ops.Rollback(cmd.Context(), db, job, to, opts)
			if err != nil {
				return a.fail(f.jsonOut, err)
			}
			if f.jsonOut {
				return a.printJSON(res)
			}
			fmt.Fprintf(a.stdout, "%s: rolled back to snapshot %d\n", res.Job, res.To)
			fmt.Fprintf(a.stdout, "  snapshot  %d\n", res.Snapshot)
			fmt.Fprintf(a.stdout, "  rows out  %d\n", res.RowsOut)
			a.printReplica(res.Replica)
			return nil
		},
	}
	f.register(cmd)
	w.register(cmd)
	cmd.Flags().Int64Var(&to, "to-snapshot", 0, "the snapshot whose rows become current")
	return cmd
}
