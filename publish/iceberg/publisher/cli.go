package publisher

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/idem-dev/idem/cmd/idem/cli"
	"github.com/idem-dev/idem/runner"

	"github.com/spf13/cobra"
)

// Extension is the idem CLI extended with the Iceberg publisher: every
// command that commits a snapshot of a job declaring [publish.iceberg]
// publishes it after COMMIT (through the CLI's Extension.Hook, a
// runner.AfterCommit hook), and `publish JOB [--verify]` catches up.
func Extension() cli.Extension {
	return cli.Extension{
		Name: "idem-iceberg",
		Hook: func(stdout, _ io.Writer, faultHook func(string) func(string)) runner.AfterCommit {
			return func(ctx context.Context, p *runner.Project, c runner.Commit) error {
				return publishAfterCommit(ctx, p, c, stdout, faultHook)
			}
		},
		Commands: func(faultHook func(string) func(string)) []*cobra.Command {
			return []*cobra.Command{newPublishCmd(faultHook)}
		},
	}
}

// publishAfterCommit publishes what a command committed of job c.Job, when
// it declares [publish.iceberg], reading the database as the command's
// project opens it, and prints a line of the report on stdout.
func publishAfterCommit(ctx context.Context, p *runner.Project, c runner.Commit, stdout io.Writer, faultHook func(string) func(string)) error {
	info, err := p.Job(c.Job)
	if err != nil || info.Iceberg == nil {
		return err
	}
	db, err := p.OpenReader(ctx, c.Job, runner.ReaderOptions{})
	if err != nil {
		return err
	}
	defer db.Close() // the publisher wrote to its catalog, not here
	rep, err := Publish(ctx, db, info, Options{Fault: faultHook(db.Path())})
	if rep != nil && (len(rep.Published) > 0 || len(rep.Expired) > 0) {
		fmt.Fprintf(stdout, "  iceberg   %s\n", rep.line())
	}
	return err
}

// openJob opens the job a verb names as every idem command does (a
// path, or the name of a job among the job files of the working folder),
// with opts.
func openJob(ctx context.Context, pathOrName string, opts ...runner.Option) (*runner.Project, *runner.JobInfo, error) {
	file, err := runner.JobFile(pathOrName)
	if err != nil {
		return nil, nil, err
	}
	p, err := runner.Open(ctx, []string{file}, opts...)
	if err != nil {
		return nil, nil, err
	}
	info, err := p.Job(p.Jobs()[0])
	return p, info, err
}

// line is a report in one line of human output.
func (r *Report) line() string {
	var snaps []string
	var files int
	var bytes int64
	for _, p := range r.Published {
		snaps = append(snaps, fmt.Sprint(p.Snapshot))
		files += p.Files
		bytes += p.Bytes
	}
	what := "nothing new"
	if len(snaps) > 0 {
		what = fmt.Sprintf("published snapshot %s (%d file(s), %s bytes)", strings.Join(snaps, ", "), files, runner.Thousands(bytes))
	}
	if r.Rebuilt {
		what += " again without the erased rows"
	}
	if r.Republished {
		what += " again, in place of the table's history (--republish)"
	}
	if len(r.Expired) > 0 {
		what += fmt.Sprintf(", expired %d Iceberg snapshot(s)", len(r.Expired))
	}
	if r.Deleted > 0 {
		what += fmt.Sprintf(", deleted %d file(s)", r.Deleted)
	}
	var rewrote []string
	for _, p := range r.Published {
		if p.Rewrote != 0 {
			rewrote = append(rewrote, fmt.Sprintf("%d (snapshot %d, now %d)", p.Rewrote, p.Snapshot, p.IcebergSnapshot))
		}
	}
	if len(rewrote) > 0 {
		what += "; rewrote Iceberg snapshot(s) " + strings.Join(rewrote, ", ")
	}
	for _, p := range r.Published {
		for _, n := range p.Notes {
			what += "; snapshot " + strconv.FormatInt(p.Snapshot, 10) + ": " + n
		}
	}
	return fmt.Sprintf("%s: %s, %.3fs", r.Table, what, r.Seconds)
}

func newPublishCmd(faultHook func(string) func(string)) *cobra.Command {
	var dbPath string
	var verify, republish, jsonOut bool
	cmd := &cobra.Command{
		Use:   "publish JOB",
		Short: "Publish every committed snapshot of a job to its Iceberg table ([publish.iceberg]), or --verify it",
		Long: `Catch up job JOB's Apache Iceberg table ([publish.iceberg]): every kept
snapshot of the job that the table does not hold becomes one Iceberg
snapshot, in order, with summary properties idem.snapshot, idem.sha256 and
idem.job_key. Snapshots already published are left alone; a publisher that
finds the table moved under it (another publisher committed first) is
refused (exit 3). After an idem erasure every kept snapshot is published
again without the subject in one commit that expires the older Iceberg
snapshots; Iceberg snapshots of expired idem snapshots are expired; files
no snapshot references are deleted.

Published snapshots carry the database id, job key and sha256 of the idem
snapshot (summary properties idem.database_id, idem.job_key, idem.sha256).
A table published from another history (a database restored from a backup
or recreated beside its table that moved on differently) is refused (exit
3) naming both; --republish publishes every kept snapshot of this database
again in one commit that expires every older Iceberg snapshot.

--verify publishes nothing: it loads the table from a fresh catalog
handle, reads every kept snapshot's Iceberg snapshot by id and compares it
with idem export --snapshot S (sha256 of the same CSV), and checks its
summary properties (database id, job key, sha256); the first difference
exits 1.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			stdout, stderr := cmd.OutOrStdout(), cmd.ErrOrStderr()
			fail := func(err error) error {
				code := runner.ExitCode(err)
				if jsonOut {
					_ = printJSON(stdout, map[string]any{"error": err.Error(), "exit_code": code})
				}
				fmt.Fprintf(stderr, "idem-iceberg: %v\n", err)
				return cli.Reported(code)
			}
			var opts []runner.Option
			if dbPath != "" {
				opts = append(opts, runner.WithDatabase(dbPath))
			}
			p, j, err := openJob(cmd.Context(), args[0], opts...)
			if err != nil {
				return fail(err)
			}
			if j.Iceberg == nil {
				return fail(runner.Usage("%s: job %s declares no [publish.iceberg]", j.File, j.Name))
			}
			db, err := p.OpenReader(cmd.Context(), j.Name, runner.ReaderOptions{ReadOnly: true})
			if err != nil {
				return fail(err)
			}
			defer db.Close()
			if verify {
				rep, err := Verify(cmd.Context(), db, j)
				if err != nil {
					return fail(err)
				}
				if jsonOut {
					return printJSON(stdout, rep)
				}
				for _, v := range rep.Verified {
					fmt.Fprintf(stdout, "%s: snapshot %d = Iceberg snapshot %d (%s rows, sha256 %s)\n", j.Name, v.Snapshot, v.IcebergSnapshot, runner.Thousands(v.Rows), v.SHA256)
				}
				fmt.Fprintf(stdout, "%s: %d snapshot(s) of %s verified\n", j.Name, len(rep.Verified), rep.Table)
				return nil
			}
			rep, err := Publish(cmd.Context(), db, j, Options{Fault: faultHook(db.Path()), Republish: republish})
			if err != nil {
				if jsonOut && rep != nil {
					_ = printJSON(stdout, rep)
				}
				return fail(err)
			}
			if jsonOut {
				return printJSON(stdout, rep)
			}
			fmt.Fprintf(stdout, "%s: %s\n", j.Name, rep.line())
			for _, p := range rep.Published {
				parts := ""
				if p.Partitions != nil {
					parts = fmt.Sprintf(", partitions replaced: %s", strings.Join(p.Partitions, ", "))
				}
				fmt.Fprintf(stdout, "  snapshot %d -> Iceberg snapshot %d (%s rows, %d file(s) added, %d removed%s, %.3fs)\n", p.Snapshot, p.IcebergSnapshot, runner.Thousands(p.Rows), p.Files, p.Removed, parts, p.Seconds)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&dbPath, "db", "", "database file (overrides the job file's database)")
	cmd.Flags().BoolVar(&verify, "verify", false, "read every published snapshot back from a fresh catalog handle and compare it with idem export")
	cmd.Flags().BoolVar(&republish, "republish", false, "publish every kept snapshot again in place of the table's history (a table published from another history is refused without it)")
	cmd.Flags().BoolVar(&jsonOut, "json", false, "print one JSON object on stdout")
	return cmd
}

func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}
