package cli

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/idem-dev/idem/internal/report"
	"github.com/idem-dev/idem/runner"

	"github.com/spf13/cobra"
)

func (a *app) newShowCmd() *cobra.Command {
	var f dbFlags
	var snapshot int64
	var audit, export string
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
--partition-by COL. For orders, the input rows by payload schema version.

A run commits the whole target's rows and bounds only: show computes its
distinct keys, sha256 and bytes from the snapshot's rows when asked,
writing them as idem export --snapshot S --format csv does (the cost of
one export of the target), and prints that file's sha256.

With --audit PREDICATE --export DIR, show runs SELECT * WHERE PREDICATE over
the partitioned Parquet export in DIR (idem export --format parquet
--partition-by COL) and a full scan of it, with DuckDB's JSON profiling,
and prints the files, row groups and bytes each read: a day-bounded
audit's cost as evidence. The predicate is your own SQL, as in idem query;
the database is not opened.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if cmd.Flags().Changed("audit") || cmd.Flags().Changed("export") {
				if audit == "" || export == "" || cmd.Flags().Changed("snapshot") {
					return a.fail(f.jsonOut, &report.UsageError{Msg: "--audit and --export go together, without --snapshot (the export is of one snapshot)"})
				}
				p, name, err := f.openOne(cmd.Context(), args[0])
				if err != nil {
					return a.fail(f.jsonOut, err)
				}
				res, err := p.Audit(cmd.Context(), name, export, audit)
				if err != nil {
					return a.fail(f.jsonOut, err)
				}
				if f.jsonOut {
					return a.printJSON(res)
				}
				a.printAudit(res)
				return nil
			}
			// A pending sha256 is a CSV write of the whole target: long
			// work, shown on a terminal as an export is.
			prj, name, err := f.openOne(cmd.Context(), args[0], a.progressOption(progressFlags{}))
			if err != nil {
				return a.fail(f.jsonOut, err)
			}
			p, err := prj.Show(cmd.Context(), name, snapshot)
			if err != nil {
				return a.fail(f.jsonOut, err)
			}
			if f.jsonOut {
				return a.printJSON(p)
			}
			if p.Requested != 0 {
				fmt.Fprintf(a.stdout, "%s: snapshot %d is %s and writes no packet; it holds the rows of snapshot %d:\n", name, p.Requested, kindText(p.RequestedKind), p.Snapshot)
			}
			a.printPacket(p)
			return nil
		},
	}
	f.register(cmd)
	cmd.Flags().Int64Var(&snapshot, "snapshot", 0, "the snapshot whose packet to print (default: the latest)")
	cmd.Flags().StringVar(&audit, "audit", "", "a `PREDICATE` to audit over --export, e.g. \"event_day = 47\"")
	cmd.Flags().StringVar(&export, "export", "", "a partitioned Parquet export `DIR` for --audit")
	return cmd
}

func (a *app) printPacket(p *runner.Packet) {
	w := a.stdout
	fmt.Fprintf(w, "%s: snapshot %d (parent %d)\n", p.Job, p.Snapshot, p.Parent)
	fmt.Fprintf(w, "  pipeline  %s\n", versionsText(p))
	fmt.Fprintf(w, "  job key   %s\n", p.JobKey)
	for _, in := range p.Inputs {
		fmt.Fprintf(w, "  input     %s  %s  %s bytes\n", in.SHA256, escapeCell(in.Name), report.Thousands(in.Bytes))
	}
	fmt.Fprintf(w, "  rows in   %s\n", report.Thousands(p.RowsIn))
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
		fmt.Fprintf(w, "  %s: %s rows, %s distinct keys, %s bytes, sha256 %s\n", escapeCell(name), report.Thousands(e.Rows), report.Thousands(e.DistinctKeys), report.Thousands(e.Bytes), e.SHA256)
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
	for _, er := range p.Erasures {
		for _, e := range er.Replaced {
			name := "whole target"
			if e.Partition != nil {
				name = p.PartitionBy + " = " + *e.Partition
			}
			sum := e.SHA256
			if e.Pending() {
				sum = "not computed before the erasure"
			}
			fmt.Fprintf(w, "  erased    by snapshot %d: %s was %s rows, sha256 %s\n", er.Snapshot, escapeCell(name), report.Thousands(e.Rows), sum)
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

func (a *app) printAudit(r *runner.AuditResult) {
	w := a.stdout
	fmt.Fprintf(w, "%s: audit %q over %s (snapshot %d, partition_by %s)\n", r.Job, r.Where, r.Export, r.Snapshot, r.PartitionBy)
	for _, s := range []struct {
		name string
		f    runner.ScanFigure
	}{{"audit    ", r.Audit}, {"full scan", r.Full}} {
		fmt.Fprintf(w, "  %s  files %d/%d, row groups %d, bytes %s, rows %s (DuckDB total_bytes_read %s)\n",
			s.name, s.f.Files, s.f.FilesTotal, s.f.RowGroups, report.Thousands(s.f.Bytes), report.Thousands(s.f.Rows), report.Thousands(s.f.BytesRead))
	}
	fmt.Fprintf(w, "  the audit reads %.1f%% of the full scan's bytes\n", 100*r.ByteRatio)
}

// versionsText names the versions a snapshot was built with. A model's
// schema is its SELECT's result (schema version 0).
func versionsText(p *runner.Packet) string {
	model := p.SchemaVersion == 0
	var parts struct {
		Transform struct {
			SHA256 string `json:"sha256"`
		} `json:"transform"`
	}
	_ = json.Unmarshal(p.Parts, &parts)
	text := p.Pipeline + " " + report.VersionText(p.TransformVersion, p.SchemaVersion, parts.Transform.SHA256, model)
	if model {
		text += ", columns from its SELECT"
	}
	return text
}

// kindText names a snapshot kind that writes no packet.
func kindText(kind string) string {
	switch kind {
	case runner.SnapshotErase:
		return "an erasure"
	case runner.SnapshotRollback:
		return "a rollback"
	}
	return "a " + kind
}
