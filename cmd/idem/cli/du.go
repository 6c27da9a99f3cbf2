package cli

import (
	"fmt"
	"strings"

	"github.com/idem-dev/idem/internal/report"
	"github.com/idem-dev/idem/runner"

	"github.com/spf13/cobra"
)

func (a *app) newDuCmd() *cobra.Command {
	var f dbFlags
	cmd := &cobra.Command{
		Use:   "du JOB",
		Short: "Report the bytes a job keeps, and what expiring each kept snapshot would free",
		Long: `Report the bytes the job keeps in its database and store: its target,
history, outcomes, tombstones, retained inputs and checkpoints, with row
counts, the database file's size and its used and free blocks; and for each
kept snapshot below the latest, what expiring it and every older one would
free (history and outcome rows at their table's bytes per row, and retained
inputs at their size), and the pins downstream jobs hold on its kept
snapshots ("held by": a snapshot an apply job's next read of changes
starts at, or one the rerun of a kept downstream snapshot reads), which
expiry keeps. Table bytes are estimated from DuckDB's
pragma_storage_info (checkpointed column segments by block offset). Only
reads. See "Sizing [retention]" in docs/retention.md.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			p, name, err := f.openOne(cmd.Context(), args[0])
			if err != nil {
				return a.fail(f.jsonOut, err)
			}
			res, err := p.DU(cmd.Context(), name)
			if err != nil {
				return a.fail(f.jsonOut, err)
			}
			if f.jsonOut {
				return a.printJSON(res)
			}
			a.printDU(res)
			return nil
		},
	}
	f.register(cmd)
	return cmd
}

func (a *app) printDU(res *runner.DUResult) {
	w := a.stdout
	b, r := res.Bytes, res.Rows
	keep := "every snapshot (no [retention] keep_snapshots)"
	if res.KeepSnapshots > 0 {
		keep = fmt.Sprintf("keep_snapshots = %d", res.KeepSnapshots)
	}
	fmt.Fprintf(w, "%s: snapshots %d-%d readable, %s\n", res.Job, res.OldestKept, res.Latest, keep)
	fmt.Fprintf(w, "  target        %10s  %s row(s)\n", byteText(b.Target), report.Thousands(r.Target))
	fmt.Fprintf(w, "  history       %10s  %s row(s)\n", byteText(b.History), report.Thousands(r.History))
	fmt.Fprintf(w, "  outcomes      %10s  %s row(s)\n", byteText(b.Outcomes), report.Thousands(r.Outcomes))
	tomb := ""
	if res.TombstonesInTarget {
		tomb = " (target rows with status deleted; part of the target)"
	}
	fmt.Fprintf(w, "  tombstones    %10s  %s row(s)%s\n", byteText(b.Tombstones), report.Thousands(r.Tombstones), tomb)
	fmt.Fprintf(w, "  inputs        %10s  %d file(s)\n", byteText(b.Inputs), res.InputFiles)
	fmt.Fprintf(w, "  checkpoints   %10s\n", byteText(b.Checkpoints))
	fmt.Fprintf(w, "  total         %10s\n", byteText(b.Total))
	fmt.Fprintf(w, "  database file %10s  (%s used, %s free blocks; all tables %s, estimated from pragma_storage_info)\n",
		byteText(res.FileBytes), byteText(res.UsedBytes), byteText(res.FreeBytes), byteText(res.TablesBytes))
	if w := res.Iceberg; w != nil {
		fmt.Fprintf(a.stdout, "  iceberg       %10s  %d file(s) in %s\n", byteText(w.Bytes), w.Files, w.Location)
	}
	for _, e := range res.Environments {
		fmt.Fprintf(w, "  environment   %10s  %s (idem env drop %s removes it)\n", byteText(e.Bytes), e.Name, e.Name)
	}
	for _, p := range res.Pins {
		fmt.Fprintf(w, "  held by       %s\n", p)
	}
	if len(res.Snapshots) > 0 {
		fmt.Fprintf(w, "  expiring through snapshot S frees:\n")
		fmt.Fprintf(w, "  %10s  %10s  %12s  %12s  %s\n", "snapshot", "frees", "history", "outcomes", "inputs")
		for _, s := range res.Snapshots {
			held := ""
			if len(s.HeldBy) > 0 {
				names := make([]string, len(s.HeldBy))
				for i, p := range s.HeldBy {
					names[i] = fmt.Sprintf("%s at %d", p.Job, p.Snapshot)
				}
				held = "  held by " + strings.Join(names, ", ")
			}
			fmt.Fprintf(w, "  %10d  %10s  %12s  %12s  %d (%s)%s\n", s.Snapshot, byteText(s.FreesBytes), report.Thousands(s.HistoryRows), report.Thousands(s.OutcomeRows), s.Inputs, byteText(s.InputBytes), held)
		}
	}
}
