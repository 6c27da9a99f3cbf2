package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/idem-dev/idem/internal/report"
	"github.com/idem-dev/idem/runner"

	"github.com/spf13/cobra"
)

func (a *app) newEraseCmd() *cobra.Command {
	var f dbFlags
	var w writerFlags
	var keys []string
	var subject string
	var dryRun, replay, noCompact bool
	cmd := &cobra.Command{
		Use:   "erase (JOB | PROJECT_DIR) (--key K | --key COL=V ... | --subject VALUE)",
		Short: "Remove a subject from every job that holds it: rows, snapshots, inputs",
		Long: `Remove every row of key K (--key; a composite key gives each of its
columns, --key region=eu --key id=7), or every row in which one of the job's
[privacy] subject columns holds VALUE together with every other row of
the same keys (--subject), in one transaction: from the target, from its
history (so no snapshot export shows it), from <target>_outcomes and the
pipeline's other tables, from checkpoints and release packets, and from
the retained input files, which are rewritten without those rows and
stored under their new sha256. Any pipeline can be erased from; one with
a position column also records, for each key erased, the highest position
seen, so that a later batch carrying the key at or below it gets outcome
erased (the record holds the key's salted sha256, as the erasure journal
does, and the position: never the key itself nor the payload).

The erasure follows the chain of jobs in the same transaction: every job
of the database that reads an erased job, transitively, loses the
subject too. A model (pipeline select) is recomputed, for every kept
snapshot, from its upstreams' rows without the subject; a job that keeps
an upstream's rows (an apply job fed by its changes) loses the rows in
which the columns it shares by name with the erased job's, or (--subject
only) its own [privacy] subject columns, hold the erased values. Their
job files are looked for beside JOB; a job of the database that read an
erased job and has no job file there is refused (exit 2) before anything
changes. Given a
PROJECT_DIR, --subject is erased from every job of the folder that
declares [privacy] subject, and from their readers: the jobs that hold none
of it are named ("holds none of it; nothing erased there") and the erasure
goes on; held by none, nothing is committed (exit 1). A model, named or
declaring the subject, is always recomputed from its upstreams, never
erased from in place; one that still holds the subject then is refused
(exit 2: an upstream holds it). --key is the key of the job named: it is
looked for in its readers only in the columns they share with it by name,
never in their [privacy] subject columns (the same value there names
someone else); only --subject crosses jobs.

A job without a position column (merge_by_key, sample) cannot tell an old
row from a new one: once a key or subject is erased from it, every later
row of it gets outcome erased, with no value kept, and the run's retained
input is rewritten without it, so an old file fed again under a new name
brings nothing back.

Each job changed gets a new snapshot. --dry-run does the work and rolls
it back: it prints every job, table and file the erasure would touch.

Once the erasure commits, the database file is compacted as idem compact
does it (rewritten, checked, swapped in; the read replica published
again), because DuckDB leaves the bytes of deleted rows in the file's free
blocks: after idem erase no byte of the subject is left in the file. That
needs free disk space for a second copy of the file and the time to
rewrite it: --no-compact skips it (a file too large to rewrite now), and
the free blocks then keep the erased rows' bytes until idem compact --db
PATH. A kill during the compaction leaves the erasure committed and the
file uncompacted: run idem compact.

Every erasure is also written to the erasure journal beside the database
(<db>.erasures: the job, the columns and a salted sha256 of the value,
never the value), which backups leave out and restores leave in place.
Every open compares the database with it: a database restored from a
copy taken before an erasure is refused (exit 3) until
--replay-journal finds the erased values again by their hash and erases
them through the chain (JOB or PROJECT_DIR gives the job files).
--expect-parent P and --epoch E guard the job named (not its readers) as
they guard a run: refused (exit 3) unless its latest snapshot is P and
its writer epoch is E.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if replay {
				return a.replayJournal(cmd, args[0], &f, len(keys) > 0 || subject != "" || dryRun, noCompact)
			}
			if !cmd.Flags().Changed("key") && !cmd.Flags().Changed("subject") {
				return a.fail(f.jsonOut, &report.UsageError{Msg: "erase needs --key K or --subject VALUE"})
			}
			opts := runner.EraseOptions{Key: keys, Subject: subject, DryRun: dryRun, NoCompact: noCompact,
				Publishes: a.ext.Hook != nil, // extension.go
				Dropped: func(db string, names []string) {
					fmt.Fprintf(a.stderr, "idem: dropped environment(s) %s of %s: they may hold rows built from the subject's; rebuild them with idem run --env NAME\n", strings.Join(names, ", "), db)
				}}
			opts.ExpectParent, opts.Epoch = w.guards(cmd)
			var hooked bytes.Buffer
			res, err := runner.Erase(cmd.Context(), args[0], opts, f.options(a.runHooks(&hooked)...)...)
			if res != nil && res.Changed() && noCompact {
				a.noCompact(res.Database)
			}
			return a.written(nil, f.jsonOut, err, &hooked, func() error {
				if f.jsonOut {
					if !isDir(args[0]) {
						return a.printJSON(res.Root())
					}
					return a.printJSON(res)
				}
				a.printChainErase(res)
				return nil
			})
		},
	}
	f.register(cmd)
	w.register(cmd)
	cmd.Flags().StringArrayVar(&keys, "key", nil, "the key value to erase (one job's key); a composite key takes --key COLUMN=VALUE for each of its columns")
	cmd.Flags().StringVar(&subject, "subject", "", "the subject value to erase, looked for in the jobs' [privacy] subject columns")
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "do the erasure and roll it back: print what it would change")
	cmd.Flags().BoolVar(&replay, "replay-journal", false, "apply again the erasures the journal beside the database records and the database lacks (a restored copy)")
	cmd.Flags().BoolVar(&noCompact, "no-compact", false, "do not compact the database file after the erasure: its free blocks keep the erased rows' bytes until idem compact (a file too large to rewrite now)")
	return cmd
}

// noCompact warns that --no-compact left the erased rows' bytes in the
// free blocks of the database file at path.
func (a *app) noCompact(path string) {
	fmt.Fprintf(a.stderr, "idem: warning: --no-compact: the free blocks of %s may still hold the erased rows' bytes until idem compact --db %s\n", path, path)
}

// replayJournal is idem erase --replay-journal.
func (a *app) replayJournal(cmd *cobra.Command, path string, f *dbFlags, other, noCompact bool) error {
	if other {
		return a.fail(f.jsonOut, &report.UsageError{Msg: "erase --replay-journal takes no --key, --subject or --dry-run: it applies the journal's erasures"})
	}
	res, err := runner.ReplayJournal(cmd.Context(), path, noCompact, f.options(runner.WithFaultHook(a.faultHook))...)
	if res != nil && len(res.Replayed) > 0 && noCompact {
		a.noCompact(res.Database)
	}
	return a.written(nil, f.jsonOut, err, nil, func() error {
		if f.jsonOut {
			return a.printJSON(res)
		}
		if len(res.Replayed) == 0 {
			fmt.Fprintf(a.stdout, "%s: holds every erasure its journal records; nothing to do\n", res.Database)
			return nil
		}
		for _, r := range res.Replayed {
			fmt.Fprintf(a.stdout, "journal: erasure of job %s at %s\n", r.Job, r.ErasedAt)
			if r.RecordOnly {
				fmt.Fprintln(a.stdout, "  nothing of it in the database; recorded")
			}
			for _, e := range r.Erasures {
				a.printChainErase(e)
			}
		}
		a.printCompacted(res.Compact)
		return nil
	})
}

// printPackets names the snapshots whose release packet an erasure
// rewrote.
func printPackets(a *app, snaps []int64) {
	if len(snaps) == 0 {
		return
	}
	list := make([]string, len(snaps))
	for i, s := range snaps {
		list[i] = fmt.Sprint(s)
	}
	fmt.Fprintf(a.stdout, "  packets   of snapshot(s) %s rewritten; idem show names the sha256 replaced\n", strings.Join(list, ", "))
}

func isDir(path string) bool {
	st, err := os.Stat(path)
	return err == nil && st.IsDir()
}

// printChainErase prints an erasure through the chain: each job erased,
// each model recomputed, the jobs looked at and left as they were.
func (a *app) printChainErase(res *runner.ChainEraseResult) {
	if res.DryRun {
		fmt.Fprintln(a.stdout, "dry run: nothing was committed; the erasure would change:")
	}
	for _, r := range res.Erased {
		what := fmt.Sprintf("key %q", r.Key)
		var tuple []string
		if len(r.KeyColumns) > 0 && json.Unmarshal([]byte(r.Key), &tuple) == nil {
			for i := range tuple {
				tuple[i] = r.KeyColumns[i] + "=" + strconv.Quote(tuple[i])
			}
			what = "key " + strings.Join(tuple, " ")
		}
		if r.SubjectColumns != nil {
			what = fmt.Sprintf("subject %q", r.Subject)
		}
		if r.AlreadyErased {
			fmt.Fprintf(a.stdout, "%s: %s was already erased; nothing to do (snapshot %d)\n", r.Job, what, r.Snapshot)
			continue
		}
		fmt.Fprintf(a.stdout, "%s: erased %s\n", r.Job, what)
		fmt.Fprintf(a.stdout, "  snapshot  %d\n", r.Snapshot)
		switch {
		case r.SubjectColumns != nil:
			fmt.Fprintf(a.stdout, "  subject   in %s; %d key(s)\n", strings.Join(r.SubjectColumns, ", "), len(r.Keys))
		case r.Position != nil:
			fmt.Fprintf(a.stdout, "  position  %d (later events at or below it are dropped as erased)\n", *r.Position)
		default:
			fmt.Fprintf(a.stdout, "  position  none\n")
		}
		for _, t := range slices.Sorted(maps.Keys(r.Removed)) {
			fmt.Fprintf(a.stdout, "  removed   %d row(s) from %s\n", r.Removed[t], t)
		}
		for _, in := range r.Inputs {
			fmt.Fprintf(a.stdout, "  rewrote   input %s -> %s (%d row(s) removed)\n", in.Old[:12], in.New[:12], in.RowsRemoved)
		}
		printPackets(a, r.Packets)
	}
	for _, m := range res.Recomputed {
		fmt.Fprintf(a.stdout, "%s: recomputed without the subject\n", m.Job)
		fmt.Fprintf(a.stdout, "  snapshot  %d\n", m.Snapshot)
		for _, s := range m.Snapshots {
			fmt.Fprintf(a.stdout, "  snapshot  %d: %d row(s), %d before\n", s.Snapshot, s.RowsAfter, s.RowsBefore)
		}
		printPackets(a, m.Packets)
	}
	for _, n := range res.Untouched {
		fmt.Fprintf(a.stdout, "%s: holds none of it; unchanged\n", n)
	}
	for _, n := range res.NotHeld {
		fmt.Fprintf(a.stdout, "%s: declares the subject and holds none of it; nothing erased there\n", n)
	}
	a.printReplica(res.Replica)
	a.printCompacted(res.Compact)
}

// printCompacted prints the compaction after an erasure.
func (a *app) printCompacted(c *runner.CompactResult) {
	if c != nil {
		fmt.Fprintf(a.stdout, "compacted %s: %s -> %s bytes; no byte of the erased rows is left in its free blocks\n", c.Database, report.Thousands(c.BytesBefore), report.Thousands(c.BytesAfter))
	}
}

func (a *app) newRollbackCmd() *cobra.Command {
	var f dbFlags
	var w writerFlags
	var to int64
	cmd := &cobra.Command{
		Use:   "rollback JOB --to-snapshot S",
		Short: "Make the current rows those of snapshot S, as a new snapshot",
		Long: `Make the job's current rows equal to the pinned rows of snapshot S and
commit them as a new snapshot. Refused (exit 3) if that would expose an
erased key ("rollback over an erasure") or cross a change of the target's
columns. The ledger, cursor and outcomes stay: batches already committed
are not applied again. --expect-parent P and --epoch E guard it as they
guard a run: refused (exit 3) unless the latest snapshot is P and the
writer epoch is E.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !cmd.Flags().Changed("to-snapshot") {
				return a.fail(f.jsonOut, &report.UsageError{Msg: "rollback needs --to-snapshot S"})
			}
			var hooked bytes.Buffer
			p, name, err := f.openOne(cmd.Context(), args[0], a.commitHooks(&hooked)...)
			if err != nil {
				return a.fail(f.jsonOut, err)
			}
			opts := runner.RollbackOptions{To: to}
			opts.ExpectParent, opts.Epoch = w.guards(cmd)
			res, err := p.Rollback(cmd.Context(), name, opts)
			return a.written(p, f.jsonOut, err, &hooked, func() error {
				if f.jsonOut {
					return a.printJSON(res)
				}
				fmt.Fprintf(a.stdout, "%s: rolled back to snapshot %d\n", res.Job, res.To)
				fmt.Fprintf(a.stdout, "  snapshot  %d\n", res.Snapshot)
				fmt.Fprintf(a.stdout, "  rows out  %d\n", res.RowsOut)
				a.printReplica(res.Replica)
				return nil
			})
		},
	}
	f.register(cmd)
	w.register(cmd)
	cmd.Flags().Int64Var(&to, "to-snapshot", 0, "the snapshot whose rows become current")
	return cmd
}
