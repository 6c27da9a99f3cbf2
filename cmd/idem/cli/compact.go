package cli

import (
	"fmt"
	"os"

	"github.com/idem-dev/idem/internal/report"
	"github.com/idem-dev/idem/runner"

	"github.com/spf13/cobra"
)

func (a *app) newCompactCmd() *cobra.Command {
	var f dbFlags
	cmd := &cobra.Command{
		Use:   "compact --db PATH",
		Short: "Rewrite the database file to give freed space back and leave no byte of erased rows",
		Long: `Rewrite the database file so that the space of deleted, expired and erased
rows goes back to the file system, and no byte of an erased subject stays in
the file's free blocks. compact holds the database as a writer does (another
writer gets exit 4), checkpoints, writes a new file with COPY FROM DATABASE
in a scratch folder beside the database, and checks it before anything
changes: the same schemas, tables, views, sequences, indexes, types and
macros, the same rows in every table (idem's own included), and the same
sha256 for every job's latest export. Only then is the new file renamed over
the database and the folder synced; the old file is kept under a second
name until then. A kill leaves the old file or the new one, and the next
writer removes the scratch folder. A read replica in place is published
again from the new file. The file needs free disk space for a second copy
while compact runs.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if f.db == "" {
				return a.fail(f.jsonOut, &report.UsageError{Msg: "compact needs --db PATH"})
			}
			if err := existingDB(f.db); err != nil {
				return a.fail(f.jsonOut, err)
			}
			res, err := runner.Compact(cmd.Context(), f.db, f.databaseOptions(a)...)
			if err != nil {
				return a.fail(f.jsonOut, err)
			}
			if f.jsonOut {
				return a.printJSON(res)
			}
			fmt.Fprintf(a.stdout, "%s: compacted\n", res.Database)
			fmt.Fprintf(a.stdout, "  bytes     %s -> %s\n", report.Thousands(res.BytesBefore), report.Thousands(res.BytesAfter))
			fmt.Fprintf(a.stdout, "  checked   %d table(s), %d job export(s), commit %d\n", res.Tables, len(res.Jobs), res.Commit)
			for _, j := range res.Jobs {
				fmt.Fprintf(a.stdout, "  job       %s snapshot %d: %s rows, sha256 %s\n", j.Job, j.Snapshot, report.Thousands(j.Rows), j.SHA256)
			}
			a.printReplica(res.Replica)
			return nil
		},
	}
	f.register(cmd)
	cmd.Flags().Lookup("db").Usage = "database file to compact (required; compact takes no job file)"
	return cmd
}

// existingDB refuses (exit 2) a database path with no file: compact and
// backup work on a database, they never create one.
func existingDB(path string) error {
	if _, err := os.Stat(path); err != nil {
		return &report.UsageError{Msg: fmt.Sprintf("no database %s: %v", path, err)}
	}
	return nil
}
