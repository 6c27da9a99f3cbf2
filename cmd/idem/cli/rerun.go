package cli

import (
	"errors"
	"fmt"

	"github.com/idem-dev/idem/runner"

	"github.com/spf13/cobra"
)

func (a *app) newRerunCmd() *cobra.Command {
	var f dbFlags
	var pf progressFlags
	var snapshot int64
	var deep, fromStart bool
	cmd := &cobra.Command{
		Use:   "rerun JOB",
		Short: "Rebuild a snapshot in a scratch database and prove it has the same bytes",
		Long: `Rebuild snapshot S (default: the latest) in a scratch database from its
retained inputs and the transform version, config and schema recorded for
it (an apply job replays its whole chain of batches up to S, with the same
batch ids and bounds), then compare the sha256 of the rebuilt target's
canonical export with that of the pinned export of S. Exit 0 and
"reproduced": true when they match; otherwise exit 1 with the difference:
the keys added, removed and changed, the first changed rows column by
column (the stored value, the rebuilt one and, for numbers, by how much),
and the path of a file beside the database that keeps the rebuilt rows
(<database>.reruns/<job>-snapshot-<S>-rebuilt.csv; idem erase removes it).
Refused (exit 3) when the SQL of a recorded version has changed since.
The job's database is only read.

A job that reads upstream jobs is rebuilt from the upstreams' rows at the
snapshots it pinned (their history); --deep also reruns each of those
upstream snapshots from its own retained inputs, down the chain (upstream
job files are looked for beside JOB), each (job, snapshot) once however
many jobs pinned it (a later pin is listed as rebuilt above), and exits 1
unless every one is reproduced.

With [retention] checkpoint_every, an apply job's rebuild starts from the
nearest checkpoint at or before S (an image of the job's state kept at every
checkpoint_every-th snapshot): its files' sha256 are verified first (a
changed or missing file is refused, exit 3, naming it), then only the
snapshots after it are replayed. --from-start replays the whole chain
instead (exit 1 when an input it needs is gone).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			pf.silence(a, f.jsonOut)
			p, name, err := f.openOne(cmd.Context(), args[0], a.progressOption(pf), runner.WithFaultHook(a.faultHook))
			if err != nil {
				return a.fail(f.jsonOut, err)
			}
			res, err := p.RerunWith(cmd.Context(), name, runner.RerunOptions{Snapshot: snapshot, Deep: deep, FromStart: fromStart})
			if err != nil && (res == nil || !errors.Is(err, runner.ErrNotReproduced)) {
				return a.fail(f.jsonOut, err)
			}
			if f.jsonOut {
				if err := a.printJSON(res); err != nil {
					return err
				}
			} else {
				verdict := "reproduced"
				if !res.Reproduced {
					verdict = "NOT reproduced"
				}
				from := ""
				if res.FromCheckpoint > 0 {
					from = fmt.Sprintf(" from checkpoint %d", res.FromCheckpoint)
				}
				fmt.Fprintf(a.stdout, "%s: snapshot %d %s (%d snapshot(s) replayed%s)\n", res.Job, res.Snapshot, verdict, res.Replayed, from)
				fmt.Fprintf(a.stdout, "  sha256   %s\n", res.SHA256)
				fmt.Fprintf(a.stdout, "  rebuilt  %s  %d rows\n", res.Rebuilt, res.Rows)
				if res.UnsignedZero {
					fmt.Fprintf(a.stdout, "  zeros    the rebuilt rows with each -0.0 written 0.0, as DuckDB 1.5, which committed this snapshot, wrote it out of EXCEPT ALL, INTERSECT ALL and into idem's history\n")
				}
				for _, e := range res.ErasedBy {
					fmt.Fprintf(a.stdout, "  erased   rows rewritten by erasure snapshot %d (idem show --snapshot %d names the sha256 replaced)\n", e, res.Snapshot)
				}
				if res.Diff != nil {
					a.printDiff(res.Diff)
				}
				if res.RebuiltPath != "" {
					fmt.Fprintf(a.stdout, "  the rebuilt rows are kept in %s\n", res.RebuiltPath)
				}
				a.printUpstreamReruns(res.Upstream, "  ")
			}
			if !res.AllReproduced() {
				return &codeError{code: runner.ExitFailure}
			}
			return nil
		},
	}
	f.register(cmd)
	pf.register(cmd)
	cmd.Flags().Int64Var(&snapshot, "snapshot", 0, "the snapshot to rebuild (default: the latest)")
	cmd.Flags().BoolVar(&fromStart, "from-start", false, "replay every snapshot from the first, not from the nearest checkpoint")
	cmd.Flags().BoolVar(&deep, "deep", false, "also rerun each upstream snapshot it pinned from its own inputs, down the chain, each (job, snapshot) once")
	return cmd
}

// printUpstreamReruns prints the reruns of --deep, indented under the
// snapshot that pinned them.
func (a *app) printUpstreamReruns(ups []*runner.RerunResult, indent string) {
	for _, u := range ups {
		verdict := "reproduced"
		if !u.Reproduced {
			verdict = "NOT reproduced"
		}
		above := ""
		if u.RerunAbove {
			above = " (rebuilt above)"
		}
		fmt.Fprintf(a.stdout, "%supstream %s: snapshot %d %s  %s%s\n", indent, u.Job, u.Snapshot, verdict, u.Rebuilt, above)
		a.printUpstreamReruns(u.Upstream, indent+"  ")
	}
}
