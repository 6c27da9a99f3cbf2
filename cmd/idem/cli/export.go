package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/idem-dev/idem/runner"
)

func (a *app) newExportCmd() *cobra.Command {
	var f dbFlags
	var pf progressFlags
	var opts runner.ExportOptions
	cmd := &cobra.Command{
		Use:   "export JOB --out PATH",
		Short: "Write a table of a job, pinned at a snapshot, in key order",
		Long: `Write the job's target (or <target>_outcomes with --table) as committed at
--snapshot (default: the latest) to --out, rows in key order, and print the
file's sha256. Two exports of one snapshot are byte-identical, whatever the
thread count. --format is csv, parquet or jsonl (default: from the
extension of --out, else csv). With --partition-by COL, --out is a folder:
one file per value of COL (COL=VALUE/data.EXT) plus manifest.json with each
file's value, rows, distinct keys, min/max of COL, bytes and sha256; the
reported sha256 is the manifest's. COL and VALUE are percent-escaped (every
byte but A-Z a-z 0-9 - _ . is %XX), NULL is COL=__HIVE_DEFAULT_PARTITION__
(the strings __HIVE_DEFAULT_PARTITION__ and NULL are written with their
first byte escaped, so hive readers such as DuckDB read them back), and a
name over 200 bytes is cut and ends in ~ and a sha256 (read such a value
from the file or the manifest): every value has its own folder.

The export is written beside --out under a name starting .idem-export- and
renamed into place: a reader sees the previous export or the new one, never
a part. A killed export leaves that temporary file or folder; the next
export to the same --out removes it, so a retry just works.

A Parquet export keeps every value exactly; a value Parquet cannot hold
(a HUGEINT beyond 38 digits, an INTERVAL with a fraction of a millisecond)
is an error naming the column and the value, and nothing is written:

` + runner.ParquetTypes,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			pf.silence(a, f.jsonOut)
			// A writer holding the database: a pinned snapshot the read
			// replica holds is read from it.
			p, name, err := f.openOne(cmd.Context(), args[0], a.progressOption(pf), a.replicaOption(), runner.WithFaultHook(a.faultHook))
			if err != nil {
				return a.fail(f.jsonOut, err)
			}
			res, err := p.Export(cmd.Context(), name, opts)
			if err != nil {
				return a.fail(f.jsonOut, err)
			}
			if f.jsonOut {
				return a.printJSON(res)
			}
			fmt.Fprintf(a.stdout, "%s: exported %s at snapshot %d\n", res.Job, res.Table, res.Snapshot)
			fmt.Fprintf(a.stdout, "  path    %s\n", res.Path)
			fmt.Fprintf(a.stdout, "  format  %s\n", res.Format)
			fmt.Fprintf(a.stdout, "  rows    %d\n", res.Rows)
			fmt.Fprintf(a.stdout, "  bytes   %d\n", res.Bytes)
			if res.PartitionBy != "" {
				fmt.Fprintf(a.stdout, "  files   %d (by %s, see %s)\n", len(res.Files), res.PartitionBy, runner.ExportManifest)
			}
			fmt.Fprintf(a.stdout, "  sha256  %s\n", res.SHA256)
			return nil
		},
	}
	f.register(cmd)
	pf.register(cmd)
	cmd.Flags().StringVar(&opts.Table, "table", "", "the target (default) or <target>_outcomes")
	cmd.Flags().Int64Var(&opts.Snapshot, "snapshot", 0, "snapshot to read (default: the latest)")
	cmd.Flags().StringVar(&opts.Out, "out", "", "output file, or folder with --partition-by")
	cmd.Flags().StringVar(&opts.Format, "format", "", "csv, parquet or jsonl (default: from --out's extension, else csv)")
	cmd.Flags().StringVar(&opts.PartitionBy, "partition-by", "", "write one file per value of this column plus manifest.json")
	return cmd
}
