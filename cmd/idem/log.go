package main

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/idem-dev/idem/runner"
)

func (a *app) newLogCmd() *cobra.Command {
	var f dbFlags
	cmd := &cobra.Command{
		Use:   "log JOB",
		Short: "Show a job's runs, newest first",
		Long: `Show a job's runs, newest first, in the order they were recorded: time
(UTC), batch id, decision, changed key parts, rows in, outcome counts,
snapshot, cursor after the run and writer epoch. Runs that wrote nothing are
listed too: skipped, already_committed (with the committed batch's snapshot
and counts), refused and failed runs (recorded after their rollback, with
the reason), and fence.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			job, db, err := f.openJob(cmd.Context(), args[0], true)
			if err != nil {
				return a.fail(f.jsonOut, err)
			}
			defer db.Close()
			entries, err := db.Log(cmd.Context(), job.Name)
			if err != nil {
				return a.fail(f.jsonOut, err)
			}
			if f.jsonOut {
				if entries == nil {
					entries = []runner.LogEntry{}
				}
				return a.printJSON(map[string]any{"job": job.Name, "runs": entries})
			}
			tw := tabwriter.NewWriter(a.stdout, 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "TIME\tBATCH\tDECISION\tCHANGED\tROWS IN\tOUTCOMES\tSNAPSHOT\tCURSOR\tEPOCH")
			for _, e := range entries {
				batch, rowsIn := "-", "-"
				if e.BatchID != nil {
					batch = *e.BatchID
				}
				if e.RowsIn != nil {
					rowsIn = fmt.Sprint(*e.RowsIn)
				}
				var oc []string
				for _, k := range slices.Sorted(maps.Keys(e.Outcomes)) {
					oc = append(oc, fmt.Sprintf("%s=%d", k, e.Outcomes[k]))
				}
				decision := e.Decision
				if e.Message != nil {
					decision += " (" + firstLine(*e.Message) + ")"
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%d\t%d\t%d\n", e.Time.UTC().Format("2006-01-02 15:04:05"),
					batch, decision, strings.Join(e.Changed, ","), rowsIn, strings.Join(oc, " "), e.Snapshot, e.Cursor, e.Epoch)
			}
			return tw.Flush()
		},
	}
	f.register(cmd)
	return cmd
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}
