package main

import (
	"fmt"
	"sort"
	"strings"

	"github.com/idem-dev/idem/runner/catalog"
	"github.com/idem-dev/idem/runner/ops"

	"github.com/spf13/cobra"
)

func (a *app) newShowCmd() *cobra.Command {
	var f dbFlags
	var snapshot int64
	cmd := &cobra.Command{
		Use:   "show JOB",
		Short: "Print the release packet of a snapshot: what its run committed, per partition",
		Long: `Print the release packet that a run wrote in its transaction, before
COMMIT, for snapshot --snapshot (default: the latest): the snapshot and its
parent, the job key parts, transform and schema versions, the input files'
sha256, the outcome counts and, for every partition the run touched (or the
whole target of a job without [target] partition_by), its rows, distinct
keys, min and max of each key column and of the partition column, and the
sha256 and bytes of its rows written as a CSV export writes them: the
sha256 of that partition's file in idem export --snapshot S --format csv
--partition-by COL. For orders, the input rows by payload schema version.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			j, db, err := f.openJob(cmd.Context(), args[0], true)
			if err != nil {
				return a.fail(f.jsonOut, err)
			}
			defer db.Close()
			p, err := ops.Show(cmd.Context(), db, j, snapshot)
			if err != nil {
				return a.fail(f.jsonOut, err)
			}
			if f.jsonOut {
				return a.printJSON(p)
			}
			a.printPacket(p)
			return nil
		},
	}
	f.register(cmd)
	cmd.Flags().Int64Var(&snapshot, "snapshot", 0, "the snapshot whose packet to print (default: the latest)")
	return cmd
}

func (a *app) printPacket(p *catalog.Packet) {
	w := a.stdout
	fmt.Fprintf(w, "%s: snapshot %d (parent %d)\n", p.Job, p.Snapshot, p.Parent)
	fmt.Fprintf(w, "  pipeline  %s transform v%d, schema v%d\n", p.Pipeline, p.TransformVersion, p.SchemaVersion)
	fmt.Fprintf(w, "  job key   %s\n", p.JobKey)
	for _, in := range p.Inputs {
		fmt.Fprintf(w, "  input     %s  %s  %s bytes\n", in.SHA256, escapeCell(in.Name), thousands(in.Bytes))
	}
	fmt.Fprintf(w, "  rows in   %s\n", thousands(p.RowsIn))
	fmt.Fprintf(w, "  outcomes  %s\n", countsText(p.Outcomes))
	if len(p.PayloadVersions) > 0 {
		fmt.Fprintf(w, "  payload   %s (input rows by payload schema version)\n", countsText(p.PayloadVersions))
	}
	for _, e := range p.Entries {
		name := "whole target"
		if e.Partition != nil {
			name = p.PartitionBy + " = " + *e.Partition
			if e.Repaired {
				name += " (a moved key removed)"
			}
		}
		fmt.Fprintf(w, "  %s: %s rows, %s distinct keys, %s bytes, sha256 %s\n", escapeCell(name), thousands(e.Rows), thousands(e.DistinctKeys), thousands(e.Bytes), e.SHA256)
		cols := make([]string, 0, len(e.Bounds))
		for c := range e.Bounds {
			cols = append(cols, c)
		}
		sort.Strings(cols)
		for _, c := range cols {
			b := e.Bounds[c]
			if b[0] == nil {
				continue
			}
			fmt.Fprintf(w, "    %s  %s .. %s\n", c, escapeCell(*b[0]), escapeCell(*b[1]))
		}
	}
}

// countsText reads "accepted 3, stale 1", by name.
func countsText(m map[string]int64) string {
	names := make([]string, 0, len(m))
	for k := range m {
		names = append(names, k)
	}
	sort.Strings(names)
	parts := make([]string, len(names))
	for i, k := range names {
		parts[i] = fmt.Sprintf("%s %d", escapeCell(k), m[k])
	}
	return strings.Join(parts, ", ")
}
