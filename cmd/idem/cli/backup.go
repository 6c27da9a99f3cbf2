package cli

import (
	"fmt"

	"github.com/idem-dev/idem/internal/report"
	"github.com/idem-dev/idem/runner"

	"github.com/spf13/cobra"
)

func (a *app) newBackupCmd() *cobra.Command {
	var f dbFlags
	var out, verify string
	cmd := &cobra.Command{
		Use:   "backup --db PATH --out DIR | backup --verify DIR",
		Short: "Copy the database and its retained inputs into a folder, with a manifest of sha256s",
		Long: `Copy the database and everything in its retained-input store (<db>.inputs/)
into the folder DIR, which must be new or empty (else exit 2). backup holds
the database as a writer does (another writer gets exit 4) and checkpoints
it, so the copy is one consistent state: target, ledger and progress are one
file and are copied together. DIR gets <name> (the database file),
<name>.inputs/ and manifest.json (each file's path, bytes and sha256, the
database's id and latest commit), written last: the folder is built beside
DIR under a partial name and renamed to DIR once complete and synced, so a
killed backup leaves no DIR, and the next backup removes its partial folder.

Restore by copying DIR's <name> and <name>.inputs/ back beside each other,
with no writer running and no <name>.wal left beside the restored file
(see docs/retention.md). --verify DIR checks a backup against its manifest
(exit 1 when a file is missing, extra or different).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			var res *runner.BackupResult
			var err error
			switch {
			case verify != "":
				if f.db != "" || out != "" {
					return a.fail(f.jsonOut, &report.UsageError{Msg: "backup --verify DIR takes no --db or --out"})
				}
				if res, err = runner.VerifyBackup(cmd.Context(), verify); err != nil {
					return a.fail(f.jsonOut, err)
				}
			case f.db == "" || out == "":
				return a.fail(f.jsonOut, &report.UsageError{Msg: "backup needs --db PATH and --out DIR (or --verify DIR)"})
			default:
				if err := existingDB(f.db); err != nil {
					return a.fail(f.jsonOut, err)
				}
				res, err = runner.Backup(cmd.Context(), f.db, out, f.databaseOptions(a)...)
			}
			return a.written(nil, f.jsonOut, err, nil, func() error {
				return a.printBackup(res, verify != "", f.jsonOut)
			})
		},
	}
	f.register(cmd)
	cmd.Flags().Lookup("db").Usage = "database file to back up (backup takes no job file)"
	cmd.Flags().StringVar(&out, "out", "", "the new or empty folder to write the backup into")
	cmd.Flags().StringVar(&verify, "verify", "", "check the backup in this folder against its manifest")
	return cmd
}

// printBackup prints a backup's result, or its verification's.
func (a *app) printBackup(res *runner.BackupResult, verified, jsonOut bool) error {
	if jsonOut {
		return a.printJSON(res)
	}
	what := "backed up"
	if verified {
		what = "verified"
	}
	fmt.Fprintf(a.stdout, "%s: %s %s\n", res.Dir, what, res.Database)
	fmt.Fprintf(a.stdout, "  commit    %d (database %s)\n", res.Commit, res.DatabaseID)
	fmt.Fprintf(a.stdout, "  files     %d, %s bytes (%s lists each with its sha256)\n", res.Files, report.Thousands(res.Bytes), runner.BackupManifest)
	return nil
}
