package cli

import (
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/idem-dev/idem/internal/report"
	"github.com/idem-dev/idem/runner"

	"github.com/spf13/cobra"
)

func (a *app) newDiffCmd() *cobra.Command {
	var f dbFlags
	var opts runner.DiffOptions
	var key []string
	var format string
	var envName string
	cmd := &cobra.Command{
		Use:   "diff JOB --from S1 --to S2 | diff FILE1 FILE2 | diff DIR --env NAME",
		Short: "Compare a job's table at two snapshots, or two exported files, by key",
		Long: `Compare the job's target (or <target>_outcomes with --table) at snapshots
--from and --to: the sha256 of each side's canonical export (csv, key order,
as idem export writes it), then the counts of keys added, removed and
changed, and the first keys of each. With two files (csv, parquet or jsonl
exports), compare them by --key (default: the first column); values are
compared as text. Exit 0 whether or not the sides differ.

diff refuses (exit 2) to compare sides with different columns: two
snapshots across a schema change that added, removed or renamed a column,
or two files with different headers. It refuses a file key that is not
unique in either file (rows would pair with many, and the changes could
outnumber the rows), and names the columns, or pairs of columns, that are
unique in both; --key with every column compares the files as sets of
rows.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if envName != "" {
				return a.diffEnv(cmd, args, f, envName) // env.go
			}
			if len(args) > 2 {
				return a.fail(f.jsonOut, &report.UsageError{Msg: "diff takes one job (--from, --to) or two files; a project folder with --env"})
			}
			var res *runner.DiffResult
			var err error
			if len(args) == 2 {
				if cmd.Flags().Changed("from") || cmd.Flags().Changed("to") || opts.Table != "" {
					return a.fail(f.jsonOut, &report.UsageError{Msg: "diff FILE1 FILE2 takes no --from, --to or --table"})
				}
				res, err = runner.DiffFiles(cmd.Context(), args[0], args[1], format, key)
			} else {
				if len(key) > 0 {
					return a.fail(f.jsonOut, &report.UsageError{Msg: "--key applies to diff FILE1 FILE2; a job's key comes from its pipeline"})
				}
				// A writer holding the database: snapshots the read
				// replica holds are read from it.
				p, name, oerr := f.openOne(cmd.Context(), args[0], a.replicaOption())
				if oerr != nil {
					return a.fail(f.jsonOut, oerr)
				}
				res, err = p.Diff(cmd.Context(), name, opts)
			}
			if err != nil {
				return a.fail(f.jsonOut, err)
			}
			if f.jsonOut {
				return a.printJSON(res)
			}
			a.printDiff(res)
			return nil
		},
	}
	f.register(cmd)
	cmd.Flags().Int64Var(&opts.From, "from", 0, "the older snapshot")
	cmd.Flags().Int64Var(&opts.To, "to", 0, "the newer snapshot")
	cmd.Flags().StringVar(&opts.Table, "table", "", "the target (default) or <target>_outcomes")
	cmd.Flags().StringSliceVar(&key, "key", nil, "key column(s) of diff FILE1 FILE2, unique in each file (default: the first column)")
	cmd.Flags().StringVar(&envName, "env", "", "compare every job environment `NAME` built (idem run DIR --env NAME) with production's latest snapshot of it")
	cmd.Flags().StringVar(&format, "format", "", "format of FILE1 and FILE2: csv, parquet or jsonl (default: from the extension)")
	return cmd
}

func (a *app) printDiff(res *runner.DiffResult) {
	w := a.stdout
	name := func(s runner.DiffSide) string {
		if s.Path != "" {
			return s.Path
		}
		return fmt.Sprintf("snapshot %d", s.Snapshot)
	}
	if res.Job != "" {
		fmt.Fprintf(w, "%s: %s, %s -> %s (key %s)\n", res.Job, res.Table, name(res.From), name(res.To), strings.Join(res.Key, ", "))
	} else {
		fmt.Fprintf(w, "%s -> %s (key %s)\n", name(res.From), name(res.To), strings.Join(res.Key, ", "))
	}
	fmt.Fprintf(w, "  from     %s  %d rows\n", res.From.SHA256, res.From.Rows)
	fmt.Fprintf(w, "  to       %s  %d rows\n", res.To.SHA256, res.To.Rows)
	if cs := columnChangesText(res.ColumnsAdded, res.ColumnsRemoved, res.ColumnsRetyped); cs != "" {
		fmt.Fprintf(w, "  columns  %s (rows compared on the columns both have)\n", cs)
	}
	if res.Identical {
		fmt.Fprintln(w, "  identical rows")
		return
	}
	printKeyCounts(w, 8, keyCounts{res.Added, res.Removed, res.Changed, res.AddedKeys, res.RemovedKeys, res.ChangedKeys})
	if len(res.Partitions) > 0 {
		fmt.Fprintf(w, "  partitions %s\n", escapeCell(strings.Join(res.Partitions, ", ")))
	}
	a.printChangedRows(res)
}

// keyCounts are a diff's rows added, removed and changed, with the first
// keys of each.
type keyCounts struct {
	added, removed, changed             int64
	addedKeys, removedKeys, changedKeys []string
}

// printKeyCounts prints a diff's rows added, removed and changed, each
// with the first keys it lists, the label padded to width.
func printKeyCounts(w io.Writer, width int, c keyCounts) {
	for _, part := range []struct {
		label string
		n     int64
		keys  []string
	}{{"added", c.added, c.addedKeys}, {"removed", c.removed, c.removedKeys}, {"changed", c.changed, c.changedKeys}} {
		line := fmt.Sprintf("  %-*s %d", width, part.label, part.n)
		if len(part.keys) > 0 {
			line += "  " + strings.Join(part.keys, ", ")
			if int64(len(part.keys)) < part.n {
				line += ", ..."
			}
		}
		fmt.Fprintln(w, escapeCell(line))
	}
}

// printChangedRows prints the changed rows a diff details, a line per
// column: from -> to, and the difference when both are numbers.
func (a *app) printChangedRows(res *runner.DiffResult) {
	w := a.stdout
	text := func(v *string) string {
		if v == nil {
			return "NULL"
		}
		return strconv.Quote(*v)
	}
	for _, r := range res.ChangedRows {
		fmt.Fprintf(w, "  row %s\n", escapeCell(r.Key))
		for _, c := range r.Columns {
			line := fmt.Sprintf("    %-16s %s -> %s", c.Column, text(c.From), text(c.To))
			if c.Delta != nil {
				line += fmt.Sprintf("  (%+g)", *c.Delta)
			}
			fmt.Fprintln(w, escapeCell(line))
		}
	}
	if n := int64(len(res.ChangedRows)); n > 0 && n < res.Changed {
		fmt.Fprintf(w, "  (the first %d of %d changed rows)\n", n, res.Changed)
	}
}

// columnChangesText lists a schema change's columns, "+added, -removed,
// ~retyped FROM -> TO", escaped for one line; "" for none.
func columnChangesText(added, removed []string, retyped []runner.ColumnChange) string {
	var cs []string
	for _, c := range added {
		cs = append(cs, "+"+c)
	}
	for _, c := range removed {
		cs = append(cs, "-"+c)
	}
	for _, c := range retyped {
		cs = append(cs, fmt.Sprintf("~%s %s -> %s", c.Name, c.From, c.To))
	}
	return escapeCell(strings.Join(cs, ", "))
}
