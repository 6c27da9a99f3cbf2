package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/idem-dev/idem/internal/report"
	"github.com/idem-dev/idem/runner"
)

func (a *app) newDocsCmd() *cobra.Command {
	var out string
	var jsonOut bool
	var wait time.Duration
	cmd := &cobra.Command{
		Use:   "docs DIR --out FOLDER",
		Short: "Write a static HTML site of a project: its lineage graph, and each job's columns, audits, snapshots and runs",
		Long: `Write a static documentation site of the project in folder DIR (its job
files: every *.toml that sets pipeline = at its top level) into FOLDER, as
one file, FOLDER/index.html, that opens from disk (file://): no server, no
network, nothing loaded from elsewhere.

The page draws the project's lineage graph (a box per job, an arrow from
each upstream to the job that reads it, laid out by topological level;
click a box to see that job) and, for each job: its description, job file,
database, target table, pipeline and versions, key, upstream and
downstream jobs, the target's columns and types (as its latest snapshot
recorded them; the input columns the pipeline declares), its model's SQL
or its steps, its [[audit]] checks with their last result, the last
failed or refused run and its message, its newest snapshots with their
row counts and the sha256 of their release packets (see idem show), and
its newest runs (see idem log).

A job's description is the job file's top-level description = "..." key;
without one, the # comment lines at the top of the job file; for a model
without either, the -- comment lines at the top of its SQL file.

Each database is opened read-only and never changed or created: a job
whose database does not exist yet, or holds nothing of it, is shown from
its job file as "not run yet". A database held by a writer fails with
exit 4 unless --wait gives it time.

The page depends on the project and its databases alone (no time of
generation; paths are relative to DIR), so the same project and
databases give the same bytes, wherever the folder lies. Every text from a job file, SQL file
or database is HTML-escaped, and the page runs only its own inline
script (a Content-Security-Policy names its sha256).

FOLDER is created if missing. idem docs writes only FOLDER/index.html and
refuses (exit 2, nothing changed) a FOLDER that holds anything else, or an
index.html it did not write: it never deletes or overwrites your files.`,
		Example: `  idem docs configs/trips --out site
  idem docs . --out build/docs --json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			dir := args[0]
			if out == "" {
				return a.fail(jsonOut, &report.UsageError{Msg: "docs: --out FOLDER is required (the folder to write the site in)"})
			}
			st, err := os.Stat(dir)
			switch {
			case err != nil:
				return a.fail(jsonOut, &report.UsageError{Msg: fmt.Sprintf("docs: project folder %s: %v", dir, unwrapPathError(err))})
			case !st.IsDir():
				return a.fail(jsonOut, &report.UsageError{Msg: fmt.Sprintf("docs: %s is not a folder: give a project folder of job files", dir)})
			}
			p, err := runner.Open(cmd.Context(), []string{dir}, runner.WithWait(wait))
			if err != nil {
				return a.fail(jsonOut, err)
			}
			res, err := p.Docs(cmd.Context(), dir, out)
			if err != nil {
				return a.fail(jsonOut, err)
			}
			if jsonOut {
				return a.printJSON(res)
			}
			index := res.Index
			fmt.Fprintf(a.stdout, "wrote %s: %d job(s), %d not run yet, %s bytes, sha256 %s\n",
				index, len(res.Jobs), len(res.NotRun), report.Thousands(int64(res.Bytes)), res.SHA256)
			if abs, err := filepath.Abs(index); err == nil {
				fmt.Fprintf(a.stdout, "open file://%s\n", filepath.ToSlash(abs))
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&out, "out", "", "the `FOLDER` to write index.html in (created if missing; refused if it holds other files)")
	cmd.Flags().DurationVar(&wait, "wait", 0, "wait this long for a writer to release a database (default: fail at once, exit 4)")
	cmd.Flags().BoolVar(&jsonOut, "json", false, "print one JSON object on stdout")
	return cmd
}

// unwrapPathError is err without the operation and path an *os.PathError
// repeats.
func unwrapPathError(err error) error {
	if pe, ok := err.(*os.PathError); ok {
		return pe.Err
	}
	return err
}
