// run --full-refresh of an apply job: its target rebuilt from the retained
// input of every batch it applied, with the job as it is now, committed
// as a new snapshot that idem rerun proves.

package history

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/idem-dev/idem/internal/catalog"
	"github.com/idem-dev/idem/internal/job"
	"github.com/idem-dev/idem/internal/jobkey"
	"github.com/idem-dev/idem/internal/pipeline"
	"github.com/idem-dev/idem/internal/report"
	"github.com/idem-dev/idem/internal/run"
	"github.com/idem-dev/idem/internal/source"
	"github.com/idem-dev/idem/internal/sqltext"
)

// Run is d.Run, but for run --full-refresh of an apply job whose target is
// the fold of its batches (run.FullRefreshes says no), which FullRefreshApply
// rebuilds.
func Run(ctx context.Context, d *run.DB, j *job.Job, opts run.RunOptions) (*run.Result, error) {
	if opts.FullRefresh && !run.FullRefreshes(j) && j.Pipeline.Mode == pipeline.ModeApply {
		res, err := FullRefreshApply(ctx, d, j, opts)
		return res, report.Fatal(err)
	}
	return d.Run(ctx, j, opts)
}

// FullRefreshApply rebuilds apply job j's target from the retained inputs
// of every batch it applied (replayed in a scratch database in their
// order, with the erasures and rollbacks between them, as idem rerun
// replays them), with the job's pipeline versions, params and config as
// they are now, and commits the rows as a new snapshot of kind
// full_refresh in one transaction: the target, its history, the snapshot
// row, and the state row, which takes the job key of the job as it is now.
// The ledger, the cursor, the outcomes and the pipeline's tombstones stay
// as the batches left them, as after a rollback. idem rerun JOB proves the
// snapshot: it rebuilds it the same way.
//
// A batch whose retained input is missing (expired, deleted) is read from
// its landing file while that still holds the recorded bytes, and that
// file is retained again; one whose input is gone from both refuses the
// rebuild (exit 3) naming the first; so does a rebuilt target whose
// columns differ from the target's (a schema change: run a new batch). A
// stream job, or one with no committed batch, is a usage error (exit 2).
// Nothing is committed on any refusal.
func FullRefreshApply(ctx context.Context, d *run.DB, j *job.Job, opts run.RunOptions) (*run.Result, error) {
	switch {
	case j.IsStream():
		return nil, report.Usage("--full-refresh: job %s reads a %s stream, whose batches idem does not keep: it cannot be rebuilt", j.Name, j.Input.Stream.Kind)
	case opts.Input != "" || opts.Source != nil || opts.From != nil || opts.BatchID != "" || opts.Partitions != nil:
		return nil, report.Usage("--full-refresh of apply job %s rebuilds it from the batches it applied: it takes no input, batch or bounds", j.Name)
	}
	st, err := catalog.ReadState(ctx, d.SQL(), j.Name)
	if err != nil {
		return nil, err
	}
	if !st.Exists || st.Snapshot == 0 {
		return nil, report.Usage("--full-refresh: job %s has applied no batch to rebuild it from", j.Name)
	}
	snaps, err := catalog.ReadSnapshots(ctx, d.SQL(), j.Name, st.Snapshot)
	if err != nil {
		return nil, err
	}
	landed, err := checkBatchesRetained(ctx, d, j, snaps)
	if err != nil {
		return nil, err
	}
	erasures, err := catalog.ErasuresBySnapshot(ctx, d.SQL(), j.Name)
	if err != nil {
		return nil, err
	}
	at := *j // the job as it is now, replaying: not fenced, keeping no checkpoints
	at.Fencing, at.Retention = "", job.Retention{}
	dir, release, err := run.NewScratchDir(d.Path())
	if err != nil {
		return nil, err
	}
	defer release()
	rows, err := rebuildApply(ctx, d, &at, snaps, erasures, dir, RerunOptions{Progress: opts.Progress, Fault: opts.Fault})
	if err != nil {
		return nil, err
	}
	parts, err := fullRefreshParts(j, snaps)
	if err != nil {
		return nil, err
	}
	partsJSON := string(jobkey.CanonicalJSON(parts))
	// The landing files that stood in for lost retained copies are
	// retained again, as a run retains its input, so that a rerun of the
	// new snapshot finds every batch's input in the store.
	if err := source.Retain(ctx, d.Path(), landed, opts.Progress); err != nil {
		return nil, err
	}
	res, err := commitRebuilt(ctx, d, j, rows, st.Snapshot, parts.Key(), partsJSON, landed, opts.Epoch, opts.ExpectParent, opts.Fault)
	if err != nil {
		return nil, err
	}
	res.Parts = parts
	return res, nil
}

// checkBatchesRetained refuses (exit 3) a rebuild of j from snaps when the
// input of a batch is gone, retained and landed (batchInput), naming the
// first such batch. It returns the landing files that stand in for lost
// retained copies.
func checkBatchesRetained(ctx context.Context, d *run.DB, j *job.Job, snaps []*catalog.SnapshotRow) ([]source.InputFile, error) {
	var landed []source.InputFile
	for _, row := range snaps {
		if !isBatch(row) {
			continue
		}
		missing := func(why string) error {
			return report.Refuse("full refresh", "--full-refresh cannot rebuild %s: batch %s (snapshot %d) %s; its batches are all needed to rebuild the target (idem rollback or a new batch instead)", j.Name, row.BatchID, row.Snapshot, why)
		}
		if len(row.Inputs.Files) == 0 && j.ReadsFiles() && !j.ReadsIceberg() {
			return nil, missing("records no retained input")
		}
		for _, f := range row.Inputs.Files {
			path, err := batchInput(ctx, d, j, f)
			if err != nil {
				return nil, err
			}
			if path == "" {
				return nil, missing(fmt.Sprintf("has lost its retained input %s (sha256 %s), and the landing folder holds no file of that name and sha256", f.Name, report.Short(f.SHA256)))
			}
			if path != source.RetainedPath(d.Path(), f.SHA256) && !slices.ContainsFunc(landed, func(l source.InputFile) bool { return l.SHA256 == f.SHA256 }) {
				landed = append(landed, source.InputFile{Path: path, SHA256: f.SHA256, Size: f.Bytes})
			}
		}
	}
	return landed, nil
}

// isBatch says whether row is a batch a rebuild replays from its input,
// not an erasure, rollback or earlier full refresh.
func isBatch(row *catalog.SnapshotRow) bool {
	return row.Kind != report.KindErase && row.Kind != report.KindRollback && row.Kind != report.KindFullRefresh
}

// rebuildApply replays snaps (every snapshot of apply job j from the
// first) in a scratch database under dir, each batch with j, and writes
// the rebuilt target to a Parquet file there, whose path and columns it
// returns.
func rebuildApply(ctx context.Context, d *run.DB, j *job.Job, snaps []*catalog.SnapshotRow, erasures map[int64][]catalog.Erasure, dir string, opts RerunOptions) (*rebuiltRows, error) {
	scratch, err := run.Open(ctx, filepath.Join(dir, "rebuild.duckdb"), run.OpenOptions{DuckDB: j.DuckDB, Journal: run.JournalSkip})
	if err != nil {
		return nil, fmt.Errorf("full refresh: scratch database: %w", err)
	}
	defer scratch.Close() // thrown away with its folder
	jobs := make([]*job.Job, len(snaps))
	for i, row := range snaps {
		switch {
		case row.Kind == report.KindFullRefresh:
			jobs[i] = j
		case isBatch(row):
			if jobs[i], err = batchJob(j, row); err != nil {
				return nil, err
			}
		}
	}
	if _, err := replayChainIn(ctx, d, scratch, snaps, jobs, erasures, dir, nil, opts); err != nil {
		return nil, err
	}
	cols, err := catalog.TargetColumns(ctx, scratch.SQL(), j.Table)
	if err != nil {
		return nil, err
	}
	out := &rebuiltRows{path: filepath.Join(dir, "rebuilt.parquet"), columns: cols}
	q := "SELECT " + strings.Join(source.RowsFileColumns(cols), ", ") + " FROM main." + sqltext.QuoteIdent(j.Table)
	if _, err := scratch.SQL().ExecContext(ctx, "COPY ("+q+") TO "+sqltext.SQLString(out.path)+" (FORMAT parquet)"); err != nil {
		return nil, fmt.Errorf("full refresh: write the rebuilt target: %w", catalog.TrimSQLError(err))
	}
	return out, nil
}

// batchJob is j replaying batch row as jobAt reads a batch's input: in
// the format the batch was read in, from the upstream snapshots it pinned,
// one batch at a time (a files-mode job's batch is one run).
func batchJob(j *job.Job, row *catalog.SnapshotRow) (*job.Job, error) {
	parts, err := decodeParts(row.PartsJSON)
	if err != nil {
		return nil, fmt.Errorf("full refresh: snapshot %d of %s: parts: %w", row.Snapshot, j.Name, err)
	}
	c := *j
	c.Input.Upstream = nil
	for _, ref := range parts.Upstream {
		c.Input.Upstream = append(c.Input.Upstream, ref.Job)
	}
	if f := row.Inputs.Format; f != "" {
		c.Input.Format = f
	} else if f, ok := parts.Config["format"].(string); ok && f != "" {
		c.Input.Format = f
	}
	if c.Input.Mode == job.InputModeFiles {
		c.Input.Mode = ""
	}
	return &c, nil
}

// rebuiltRows is a target rebuilt in a scratch database: its rows in a
// Parquet file (source.RowsFileColumns) and its columns.
type rebuiltRows struct {
	path    string
	columns []catalog.TargetColumn
}

// fullRefreshParts are the key parts of a full refresh of j over snaps:
// its transform, config and schema as they are now; its input part names
// the batches it replayed (each snapshot's job key), and it pins the
// upstream snapshots its last batch pinned, so that a rerun reads them.
func fullRefreshParts(j *job.Job, snaps []*catalog.SnapshotRow) (jobkey.Parts, error) {
	var replayed []string
	format := j.Input.Format
	var upstream []jobkey.UpstreamRef
	for _, row := range snaps {
		replayed = append(replayed, fmt.Sprintf("%d %s %s", row.Snapshot, row.Kind, row.JobKey))
		if !isBatch(row) {
			continue
		}
		if row.Inputs.Format != "" {
			format = row.Inputs.Format
		}
		p, err := decodeParts(row.PartsJSON)
		if err != nil {
			return jobkey.Parts{}, fmt.Errorf("full refresh: snapshot %d of %s: parts: %w", row.Snapshot, j.Name, err)
		}
		upstream = p.Upstream
	}
	return jobkey.Parts{
		Input:     pipeline.DigestString(strings.Join(replayed, "\n")),
		Upstream:  upstream,
		Transform: j.TransformPart(),
		Config:    j.Config(format),
		Schema:    j.SchemaPart(),
	}, nil
}

// commitRebuilt makes j's target in d hold the rebuilt rows and commits
// them as snapshot parent+1 of kind full_refresh with key and parts, in
// one transaction, under the writer guards of a run: the job's latest
// snapshot must still be parent. retained are input files copied back
// into the store, recorded in the same transaction. A rerun commits its
// replay the same way.
func commitRebuilt(ctx context.Context, d *run.DB, j *job.Job, rows *rebuiltRows, parent int64, key, parts string, retained []source.InputFile, epoch, expectParent *int64, fault func(string)) (*run.Result, error) {
	hit := func(point string) {
		if fault != nil {
			fault(point)
		}
	}
	hit(run.FaultBeforeBegin)
	conn, tx, err := d.BeginPinned(ctx)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	defer func() { _ = tx.Rollback() }() // first: an open transaction holds conn
	fail := func(err error) (*run.Result, error) { return nil, errors.Join(err, ignoreDone(tx.Rollback())) }
	st, err := catalog.ReadState(ctx, tx, j.Name)
	if err != nil {
		return fail(err)
	}
	if err := errors.Join(st.CheckEpoch(j, epoch), st.CheckParent(expectParent)); err != nil {
		return fail(err)
	}
	if st.Snapshot != parent {
		return fail(report.Refuse("stale parent", "job %s committed snapshot %d while its full refresh rebuilt snapshot %d: run it again", j.Name, st.Snapshot, parent))
	}
	if err := catalog.CheckOwners(ctx, tx, j, true); err != nil {
		return fail(err)
	}
	if err := st.CheckIdentity(j); err != nil {
		return fail(err)
	}
	if err := catalog.CheckReleased(ctx, tx, j, true); err != nil {
		return fail(err)
	}
	cols, err := catalog.TargetColumns(ctx, tx, j.Table)
	if err != nil {
		return fail(err)
	}
	if !slices.Equal(cols, rows.columns) {
		return fail(report.Refuse("full refresh", "the rebuilt target of %s has other columns than the target (%s): a schema change is a new batch, not a full refresh", j.Name, j.Table))
	}
	names := make([]string, len(cols))
	casts := make([]string, len(cols))
	for i, c := range cols {
		names[i] = sqltext.QuoteIdent(c.Name)
		casts[i] = "CAST(" + names[i] + " AS " + c.Type + ")"
	}
	list, target := strings.Join(names, ", "), sqltext.QuoteIdent(j.Table)
	for _, q := range []string{
		"DELETE FROM " + target,
		"INSERT INTO " + target + " (" + list + ") SELECT " + strings.Join(casts, ", ") + " FROM read_parquet(" + sqltext.SQLString(rows.path) + ") ORDER BY ALL",
		"DROP TABLE IF EXISTS idem_touched",
	} {
		if _, err := tx.ExecContext(ctx, q); err != nil {
			return fail(fmt.Errorf("full refresh of %s: %w", j.Name, catalog.TrimSQLError(err)))
		}
	}
	if n, err := catalog.ErasedIn(ctx, tx, j, "SELECT * FROM "+target); err != nil {
		return fail(err)
	} else if n > 0 {
		return fail(report.Refuse("erasure", "the rebuilt target of %s holds %d row(s) of erased keys: nothing committed", j.Name, n))
	}
	for _, f := range retained {
		if err := catalog.RecordInput(ctx, tx, f.SHA256, f.Size); err != nil {
			return fail(fmt.Errorf("record retained input %s: %w", f.Path, err))
		}
	}
	snapshot := st.Snapshot + 1
	if _, err := catalog.RecordHistory(ctx, tx, j, snapshot); err != nil {
		return fail(err)
	}
	hit(run.FaultAfterTarget)
	if err := catalog.WriteSnapshotOnly(ctx, tx, j, st, snapshot, report.KindFullRefresh, catalog.SnapshotInputs{}, key, parts); err != nil {
		return fail(err)
	}
	if _, err := run.WriteCheckpoint(ctx, d, tx, j, snapshot, fault); err != nil {
		return fail(err)
	}
	out, err := catalog.CountRows(ctx, tx, j.Table)
	if err != nil {
		return fail(err)
	}
	hit(run.FaultBeforeCommit)
	if err := tx.Commit(); err != nil {
		return nil, fmt.Errorf("commit full refresh of %s: %w", j.Name, err)
	}
	hit(run.FaultAfterCommit)
	_, _ = conn.ExecContext(context.WithoutCancel(ctx), "CHECKPOINT")
	return &run.Result{Job: j.Name, Decision: report.DecisionLoaded, JobKey: key, Snapshot: snapshot, Parent: st.Snapshot,
		RowsOut: out, Outcomes: map[string]int64{}, Cursor: st.Cursor, Epoch: st.Epoch, Target: j.Table, FullRefresh: true,
		Inputs: []source.InputFile{}, Replica: d.PublishReplica(ctx, fault)}, nil
}

// replayFullRefresh replays full-refresh snapshot row of the job in
// scratch: the job as it ran for it (at) rebuilds the target from every
// snapshot before it, read from d, and the rows are committed in scratch
// with the recorded key and parts.
func replayFullRefresh(ctx context.Context, d, scratch *run.DB, at *job.Job, row *catalog.SnapshotRow, erasures map[int64][]catalog.Erasure, dir string, opts RerunOptions) error {
	before, err := catalog.ReadSnapshots(ctx, d.SQL(), at.Name, row.Snapshot-1)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	rows, err := rebuildApply(ctx, d, at, before, erasures, dir, opts)
	if err != nil {
		return fmt.Errorf("rerun: full refresh of snapshot %d of %s: %w", row.Snapshot, at.Name, err)
	}
	if _, err := commitRebuilt(ctx, scratch, at, rows, row.Snapshot-1, row.JobKey, row.PartsJSON, nil, nil, nil, nil); err != nil {
		return fmt.Errorf("rerun: full refresh of snapshot %d of %s: %w", row.Snapshot, at.Name, err)
	}
	return nil
}

// batchInput is the file a replay reads input f of job j from: its
// retained copy, or else, when expiry (or a hand) removed it, the file of
// its name in the job's landing folder (the folder of its [input] path)
// while it still holds the recorded bytes; "" when neither does. A copy
// whose bytes are not the recorded ones is an error, never read.
func batchInput(ctx context.Context, d *run.DB, j *job.Job, f catalog.InputRef) (string, error) {
	retained := source.RetainedPath(d.Path(), f.SHA256)
	if _, err := os.Stat(retained); err == nil {
		return retained, source.VerifyRetained(ctx, d.Path(), f)
	}
	if j.Input.Path == "" || f.Name == "" || filepath.Base(f.Name) != f.Name {
		return "", nil
	}
	dir := j.Input.Path
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		dir = filepath.Dir(dir)
	}
	landed := filepath.Join(dir, f.Name)
	sum, _, err := source.SumFile(ctx, landed, nil)
	if err != nil || sum != f.SHA256 {
		return "", nil
	}
	return landed, nil
}
