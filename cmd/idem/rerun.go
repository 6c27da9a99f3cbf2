package main

import (
	"fmt"

	"github.com/idem-dev/idem/runner/job"
	"github.com/idem-dev/idem/runner/ops"

	"github.com/spf13/cobra"
)

func (a *app) newRerunCmd() *cobra.Command {
	var f dbFlags
	var pf progressFlags
	var snapshot int64
	cmd := &cobra.Command{
		Use:   "rerun JOB",
		Short: "Rebuild a snapshot in a scratch database and prove it has the same bytes",
		Long: `Rebuild snapshot S (default: the latest) in a scratch database from its
retained inputs and the transform version, config and schema recorded for
it (an apply job replays its whole chain of batches up to S, with the same
batch ids and bounds), then compare the sha256 of the rebuilt target's
canonical export with that of the pinned export of S. Exit 0 and
"reproduced": true when they match; otherwise the difference and exit 1.
Refused (exit 3) when the SQL of a recorded version has changed since.
The job's database is only read.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			j, db, err := f.openJob(cmd.Context(), args[0], true)
			if err != nil {
				return a.fail(f.jsonOut, err)
			}
			defer db.Close()
			res, err := ops.Rerun(cmd.Context(), db, j, ops.RerunOptions{Snapshot: snapshot, DuckDB: f.openOptions(j).DuckDB, Progress: a.progress(pf), Fault: a.faultHook(db.Path())})
			if err != nil {
				return a.fail(f.jsonOut, err)
			}
			if f.jsonOut {
				if err := a.printJSON(res); err != nil {
					return err
				}
			} else {
				verdict := "reproduced"
				if !res.Reproduced {
					verdict = "NOT reproduced"
				}
				fmt.Fprintf(a.stdout, "%s: snapshot %d %s (%d snapshot(s) replayed)\n", res.Job, res.Snapshot, verdict, res.Replayed)
				fmt.Fprintf(a.stdout, "  sha256   %s\n", res.SHA256)
				fmt.Fprintf(a.stdout, "  rebuilt  %s  %d rows\n", res.Rebuilt, res.Rows)
				if res.Diff != nil {
					a.printDiff(res.Diff)
				}
			}
			if !res.Reproduced {
				return &codeError{code: job.ExitFailure}
			}
			return nil
		},
	}
	f.register(cmd)
	pf.register(cmd)
	cmd.Flags().Int64Var(&snapshot, "snapshot", 0, "the snapshot to rebuild (default: the latest)")
	return cmd
}
