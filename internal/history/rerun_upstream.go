// Rerun of a job that reads upstream jobs: the upstreams' rows at the
// snapshots it pinned come from their history.

package history

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
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

// ModelAt is a model job as it ran for a snapshot: the model text the
// database kept for the recorded transform part (catalog.ModelText), or
// else the model file of the recorded transform version, with the macros
// it ran with (macrosAt); either is checked against the recorded sha256.
func ModelAt(ctx context.Context, q catalog.Querier, j *job.Job, row *catalog.SnapshotRow, parts jobkey.Parts) (*job.Job, error) {
	text, kept, err := catalog.ModelText(ctx, q, j.Name, parts.Transform.SHA256)
	if err != nil {
		return nil, err
	}
	var at *job.Job
	switch {
	case kept:
		if at, err = j.ModelWith(text); err != nil {
			return nil, report.Refuse("rerun", "snapshot %d of %s: the model text this database kept: %v", row.Snapshot, j.Name, err)
		}
		at.TransformVersion = parts.Transform.Version
	case parts.Transform.Version == 0:
		if at, err = macrosAt(ctx, q, j, row, parts); err != nil {
			return nil, err
		}
		if got := at.TransformPart().SHA256; got != parts.Transform.SHA256 {
			return nil, report.Refuse("rerun", "snapshot %d of %s was built with model text sha256 %s, which this database does not keep and %s no longer holds (sha256 %s): cannot rebuild it with other SQL",
				row.Snapshot, j.Name, report.Short(parts.Transform.SHA256), j.ModelFile, report.Short(got))
		}
		at.TransformVersion = 0 // the file still holds that text
	default:
		if at, err = j.ModelAt(parts.Transform.Version); err != nil {
			return nil, report.Refuse("rerun", "snapshot %d of %s: %v", row.Snapshot, j.Name, err)
		}
	}
	if at, err = macrosAt(ctx, q, at, row, parts); err != nil {
		return nil, err
	}
	at.Fencing = ""
	at.Retention = job.Retention{}
	if got := at.TransformPart(); got.SHA256 != parts.Transform.SHA256 {
		return nil, report.Refuse("rerun", "snapshot %d of %s was built with model v%d with sha256 %s; %s now has sha256 %s: cannot rebuild it with other SQL",
			row.Snapshot, j.Name, parts.Transform.Version, report.Short(parts.Transform.SHA256), at.ModelFile, report.Short(got.SHA256))
	}
	if t, ok := parts.Config["target"].(string); ok && t != "" {
		at.Table = t
	}
	at.PartitionBy, _ = parts.Config["partition_by"].(string)
	at.Params = map[string]any{}
	recorded, _ := parts.Config["params"].(map[string]any)
	for name, decl := range j.Pipeline.Params {
		cv, err := pipeline.ConvertParam(decl.Type, fromJSON(recorded[name]))
		if err != nil {
			return nil, fmt.Errorf("rerun: snapshot %d of %s: param %s: %w", row.Snapshot, j.Name, name, err)
		}
		at.Params[name] = cv
	}
	return at, nil
}

// macrosAt is at with the macros the database kept for the transform part
// snapshot row was built with (catalog.MacroTexts): a macro's text is part
// of that part's sha256, so a snapshot built before a macro file was
// edited reruns with the text it ran with. at is returned as it is when
// none were kept (it used no macro); the caller checks the sha256.
func macrosAt(ctx context.Context, q catalog.Querier, at *job.Job, row *catalog.SnapshotRow, parts jobkey.Parts) (*job.Job, error) {
	texts, kept, err := catalog.MacroTexts(ctx, q, at.Name, parts.Transform.SHA256)
	if err != nil || !kept {
		c := *at
		return &c, err
	}
	with, err := at.WithMacros(texts)
	if err != nil {
		return nil, report.Refuse("rerun", "snapshot %d of %s: the macro text this database kept: %v", row.Snapshot, at.Name, err)
	}
	return with, nil
}

// replayUpstream rebuilds a snapshot of a job that reads upstream jobs in
// the scratch database: each upstream's rows at the snapshot this one
// pinned are read from its history in the database and written to a
// Parquet file in the scratch folder, which the replayed run reads as
// {{upstream:JOB}}; the replay must pin exactly the recorded refs.
func replayUpstream(ctx context.Context, d *run.DB, scratch *run.DB, j *job.Job, row *catalog.SnapshotRow, dir string, ropts RerunOptions) error {
	parts, err := decodeParts(row.PartsJSON)
	if err != nil {
		return fmt.Errorf("rerun: snapshot %d of %s: parts: %w", row.Snapshot, j.Name, err)
	}
	if len(parts.Upstream) == 0 && j.ReadsUpstream() { // a model without upstreams (a calendar) reads nothing
		return fmt.Errorf("rerun: snapshot %d of %s records no upstream snapshot", row.Snapshot, j.Name)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	// An apply job read the changes of its upstreams between the snapshots
	// its batch names ("upstream:a:0-3,b:2-4"); any other, their rows.
	changes := j.Pipeline.Mode == pipeline.ModeApply
	var ranges map[string]source.Range
	if changes {
		if ranges, err = batchRanges(row.BatchID); err != nil {
			return fmt.Errorf("rerun: snapshot %d of %s: %w", row.Snapshot, j.Name, err)
		}
	}
	rows, columns := map[string]string{}, map[string][]catalog.TargetColumn{}
	for _, ref := range parts.Upstream {
		out := filepath.Join(dir, ref.Job+".parquet")
		from := int64(-1)
		if changes {
			r, ok := ranges[ref.Job]
			if !ok || r.To != ref.Snapshot {
				return fmt.Errorf("rerun: snapshot %d of %s: batch %s does not name the pinned snapshot %d of %s", row.Snapshot, j.Name, row.BatchID, ref.Snapshot, ref.Job)
			}
			from = r.From
		}
		cols, err := exportUpstream(ctx, d, ref, from, out)
		if err != nil {
			return fmt.Errorf("rerun: snapshot %d of %s: %w", row.Snapshot, j.Name, err)
		}
		rows[ref.Job], columns[ref.Job] = out, cols
	}
	opts := run.RunOptions{Progress: ropts.Progress, Fault: ropts.Fault, Partitions: row.Inputs.Partitions, SkipAudits: true,
		Source: &source.Upstream{Job: j, Recorded: parts.Upstream, Rows: rows, Columns: columns, Changes: changes, Realign: row.Inputs.Realigned}}
	res, err := runReplay(ctx, scratch, j, opts)
	if err != nil {
		return fmt.Errorf("rerun: replay snapshot %d of %s: %w", row.Snapshot, j.Name, err)
	}
	if res.Decision != report.DecisionLoaded && res.Decision != report.DecisionApplied {
		return fmt.Errorf("rerun: replay of snapshot %d of %s was %s, not a commit", row.Snapshot, j.Name, res.Decision)
	}
	if res.JobKey != row.JobKey {
		return fmt.Errorf("rerun: replay of snapshot %d of %s has job key %s, recorded %s: the upstream rows or the model's result columns differ", row.Snapshot, j.Name, report.Short(res.JobKey), report.Short(row.JobKey))
	}
	return nil
}

// exportUpstream writes the rows of upstream job ref.Job as committed at
// ref.Snapshot (its history) to a Parquet file, after checking that the
// snapshot is the one the downstream pinned (same job key), and returns
// the snapshot's columns and types, which the replay casts the file's
// columns back to. A type Parquet cannot hold exactly (HUGEINT, UHUGEINT:
// DuckDB would write a DOUBLE) goes as its text.
//
// With from at 0 or above it writes the upstream's changes after snapshot
// from up to ref.Snapshot instead (catalog.ChangesSelect, with idem_op),
// as an apply job over upstream changes read them.
func exportUpstream(ctx context.Context, d *run.DB, ref jobkey.UpstreamRef, from int64, out string) ([]catalog.TargetColumn, error) {
	if err := catalog.CheckNotExpired(ctx, d.SQL(), ref.Job, ref.Snapshot); err != nil {
		return nil, fmt.Errorf("upstream %s: %w", ref.Job, err)
	}
	up, err := catalog.ReadSnapshot(ctx, d.SQL(), ref.Job, ref.Snapshot)
	if err != nil {
		return nil, fmt.Errorf("upstream %s: %w", ref.Job, err)
	}
	if up.JobKey != ref.JobKey {
		return nil, fmt.Errorf("upstream %s snapshot %d has job key %s, but %s was pinned", ref.Job, ref.Snapshot, report.Short(up.JobKey), report.Short(ref.JobKey))
	}
	var q string
	if from < 0 {
		q, err = catalog.PinnedSelect(ctx, d.SQL(), ref.Job, up.Columns, ref.Snapshot)
	} else {
		q, err = changesSelect(ctx, d, ref.Job, up, from, ref.Snapshot)
	}
	if err != nil {
		return nil, err
	}
	list := source.RowsFileColumns(up.Columns)
	if from >= 0 {
		list = append(list, sqltext.QuoteIdent(source.OpColumn))
	}
	q = "SELECT " + strings.Join(list, ", ") + " FROM (" + q + ")"
	if _, err := d.SQL().ExecContext(ctx, "COPY ("+q+") TO "+sqltext.SQLString(out)+" (FORMAT parquet)"); err != nil {
		return nil, fmt.Errorf("read upstream %s at snapshot %d: %w", ref.Job, ref.Snapshot, catalog.TrimSQLError(err))
	}
	return up.Columns, nil
}

// rerunID names one snapshot of one job.
type rerunID struct {
	job      string
	snapshot int64
}

// rerunUpstreams reruns, for idem rerun --deep, each upstream snapshot row
// pinned, each with its own upstreams. A (job, snapshot) that an earlier
// branch of the same rerun rebuilt (a diamond: two jobs pinning one
// upstream snapshot) is not rebuilt again: it is listed with that
// rebuild's verdict and RerunAbove.
func rerunUpstreams(ctx context.Context, d *run.DB, row *catalog.SnapshotRow, opts RerunOptions) ([]*RerunResult, error) {
	parts, err := decodeParts(row.PartsJSON)
	if err != nil {
		return nil, err
	}
	if opts.done == nil {
		opts.done = map[rerunID]*RerunResult{}
	}
	var out []*RerunResult
	for _, ref := range parts.Upstream {
		id := rerunID{ref.Job, ref.Snapshot}
		if r, ok := opts.done[id]; ok {
			again := *r
			again.Upstream, again.Diff, again.RerunAbove = nil, nil, true
			out = append(out, &again)
			continue
		}
		if opts.Upstream == nil {
			return nil, fmt.Errorf("rerun --deep: no way to find the job file of upstream %s", ref.Job)
		}
		uj, err := opts.Upstream(ref.Job)
		if err != nil {
			return nil, fmt.Errorf("rerun --deep: upstream %s: %w", ref.Job, err)
		}
		o := opts
		o.Snapshot = ref.Snapshot
		r, err := Rerun(ctx, d, uj, o)
		if err != nil {
			return nil, fmt.Errorf("rerun --deep: upstream %s snapshot %d: %w", ref.Job, ref.Snapshot, err)
		}
		opts.done[id] = r
		out = append(out, r)
	}
	return out, nil
}

// AllReproduced says whether the rerun and, with --deep, every upstream rerun
// reproduced its snapshot.
func (r *RerunResult) AllReproduced() bool {
	if !r.Reproduced {
		return false
	}
	for _, u := range r.Upstream {
		if !u.AllReproduced() {
			return false
		}
	}
	return true
}

// changesSelect is the query of upstream name's changes after snapshot
// from up to to, keyed as source.Upstream keys them live.
func changesSelect(ctx context.Context, d *run.DB, name string, up *catalog.SnapshotRow, from, to int64) (string, error) {
	if from > 0 {
		if err := catalog.CheckNotExpired(ctx, d.SQL(), name, from); err != nil {
			return "", fmt.Errorf("upstream %s: %w", name, err)
		}
	}
	return catalog.ChangesSelect(ctx, d.SQL(), name, up.Columns, source.ChangesKey(up), from, to)
}

// batchRanges reads the ranges of upstream snapshots an apply batch over
// upstream changes names ("upstream:a:0-3,b:2-4"), by job.
func batchRanges(batchID string) (map[string]source.Range, error) {
	list, ok := strings.CutPrefix(batchID, "upstream:")
	if !ok {
		return nil, fmt.Errorf("batch %q is not named by upstream snapshots", batchID)
	}
	out := map[string]source.Range{}
	for _, item := range strings.Split(list, ",") {
		var r source.Range
		name, span, ok := strings.Cut(item, ":")
		if _, err := fmt.Sscanf(span, "%d-%d", &r.From, &r.To); !ok || err != nil || name == "" {
			return nil, fmt.Errorf("batch %q: %q is not JOB:FROM-TO", batchID, item)
		}
		r.Job = name
		out[name] = r
	}
	return out, nil
}
