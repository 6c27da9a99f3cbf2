package history

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/idem-dev/idem/internal/catalog"
	"github.com/idem-dev/idem/internal/diff"
	"github.com/idem-dev/idem/internal/export"
	"github.com/idem-dev/idem/internal/job"
	"github.com/idem-dev/idem/internal/jobkey"
	"github.com/idem-dev/idem/internal/pipeline"
	"github.com/idem-dev/idem/internal/report"
	"github.com/idem-dev/idem/internal/run"
	"github.com/idem-dev/idem/internal/source"
)

// RerunOptions say which snapshot idem rerun rebuilds, and how the scratch
// database is opened.
type RerunOptions struct {
	Snapshot int64 // 0: the latest
	DuckDB   job.DuckDBSettings
	// Progress receives the replayed runs' progress.
	Progress report.Progress
	// Fault is passed the fault points of the replayed runs (in the scratch
	// database) and FaultRerunExport (crash tests).
	Fault func(point string)
	// Deep also reruns each upstream snapshot the rebuilt one pinned, from
	// its own retained inputs, down the chain; Upstream finds an upstream
	// job by name (the CLI looks beside the job file).
	Deep     bool
	Upstream func(name string) (*job.Job, error)
	// FromStart replays the whole chain from the first snapshot instead of
	// from the nearest checkpoint (rerun --from-start).
	FromStart bool
	// done holds, with Deep, the reruns made so far by (job, snapshot), so
	// that a snapshot pinned by several jobs of a diamond is rebuilt once.
	done map[rerunID]*RerunResult
}

// FaultRerunExport is the fault point a rerun passes once the snapshot is
// rebuilt, before the exports are compared.
const FaultRerunExport = "rerun_export"

// RerunResult reports a pinned re-run: the sha256 of the canonical export
// (csv, key order) of the snapshot as stored and of the rebuilt target.
type RerunResult struct {
	Job        string `json:"job"`
	Reproduced bool   `json:"reproduced"`
	Snapshot   int64  `json:"snapshot"`
	SHA256     string `json:"sha256"`
	Rebuilt    string `json:"rebuilt_sha256"`
	Rows       int64  `json:"rows"`
	Replayed   int    `json:"replayed"` // snapshots replayed in the scratch database
	// FromCheckpoint is the snapshot of the checkpoint the rebuild
	// started from (verified, then loaded); 0 when it replayed from the
	// start.
	FromCheckpoint int64        `json:"from_checkpoint"`
	Diff           *diff.Result `json:"diff,omitempty"`
	// RebuiltPath, when the rebuild did not reproduce the snapshot, is the
	// file that keeps the rebuilt rows (canonical CSV, key order) beside
	// the database: RerunKeptPath.
	RebuiltPath string `json:"rebuilt_path,omitempty"`
	// Upstream holds, with Deep, the reruns of the upstream snapshots the
	// rebuilt snapshot pinned (each with its own upstreams).
	Upstream []*RerunResult `json:"upstream,omitempty"`
	// RerunAbove says, with Deep, that this (job, snapshot) was already
	// rebuilt by an earlier branch of the same rerun (a diamond): its
	// verdict is that rebuild's, its upstreams are listed there.
	RerunAbove bool `json:"rerun_above,omitempty"`
	// UnsignedZero says the snapshot, committed on DuckDB 1.5, was
	// reproduced with each -0.0 of a DOUBLE or REAL column written 0.0, as
	// DuckDB 1.5 wrote it out of EXCEPT ALL and INTERSECT ALL and in
	// idem's history; Rebuilt is the sha256 of the rows written so.
	UnsignedZero bool `json:"unsigned_zero,omitempty"`
	// ErasedBy are the erasures (snapshots of this job) that rewrote the
	// snapshot's rows after it was committed: the sha256 compared is that
	// of its rows since, and its packet keeps the one they replaced.
	ErasedBy []int64 `json:"erased_by,omitempty"`
}

// Rerun rebuilds snapshot S of job in a scratch database (in a folder
// beside the database, removed afterwards, or by the next rerun when this
// one is killed; see newScratchDir) from its retained inputs and the transform
// version, config and schema recorded in the snapshot rows, and compares the
// canonical export of the result with the pinned export of S. An apply job
// replays its whole chain of snapshots up to S in order, with the same batch
// ids and bounds (erasures and rollbacks included); a refresh job replays
// from its last load at or before S. The SQL is read through the job's
// pipeline: a version whose files no longer match the recorded sha256 is
// refused (ErrRefused). Unless opts.FromStart, an apply job starts from the
// checkpoint RerunStart names: its files are verified first (a changed or
// missing one is refused, ErrRefused, naming it), it is loaded into the
// scratch database, and only the snapshots after it are replayed. The
// database itself is only read.
func Rerun(ctx context.Context, d *run.DB, j *job.Job, opts RerunOptions) (*RerunResult, error) {
	s, _, err := catalog.ResolveSnapshot(ctx, d.SQL(), j.Name, opts.Snapshot)
	if err != nil {
		return nil, err
	}
	snaps, err := catalog.ReadSnapshots(ctx, d.SQL(), j.Name, s)
	if err != nil {
		return nil, err
	}
	chain := replayChain(j, snaps)
	erasures, err := catalog.ErasuresBySnapshot(ctx, d.SQL(), j.Name)
	if err != nil {
		return nil, err
	}
	var ckpt *catalog.Checkpoint
	var ckptJob *job.Job
	if !opts.FromStart {
		if ckpt, err = RerunStart(ctx, d.SQL(), j, s, chain); err != nil {
			return nil, err
		}
	}
	if ckpt != nil {
		// Never load a checkpoint whose bytes are not the recorded ones.
		if err := source.VerifyCheckpoint(ctx, d.Path(), ckpt); err != nil {
			return nil, err
		}
		at := chain[0]
		for i, row := range chain {
			if row.Snapshot == ckpt.Snapshot {
				at, chain = row, chain[i+1:]
				break
			}
		}
		if ckptJob, err = jobAt(ctx, d.SQL(), j, at); err != nil {
			return nil, err
		}
	}
	// Check every version before any work.
	jobs := make([]*job.Job, len(chain))
	for i, row := range chain {
		if row.Kind == report.KindErase || row.Kind == report.KindRollback {
			continue
		}
		if jobs[i], err = jobAt(ctx, d.SQL(), j, row); err != nil {
			return nil, err
		}
	}

	dir, release, err := run.NewScratchDir(d.Path())
	if err != nil {
		return nil, err
	}
	defer release()
	scratch, err := run.Open(ctx, filepath.Join(dir, "scratch.duckdb"), run.OpenOptions{DuckDB: opts.DuckDB, Journal: run.JournalSkip})
	if err != nil {
		return nil, fmt.Errorf("rerun: scratch database: %w", err)
	}
	defer scratch.Close() // thrown away with its folder: its close loses nothing

	if ckpt != nil {
		if err := scratch.LoadCheckpoint(ctx, d.Path(), ckptJob, ckpt); err != nil {
			return nil, fmt.Errorf("rerun: %w", err)
		}
	}
	last, err := replayChainIn(ctx, d, scratch, chain, jobs, erasures, dir, ckptJob, opts)
	if err != nil {
		return nil, err
	}
	if last == nil {
		return nil, fmt.Errorf("rerun: snapshot %d of %s has no batch to replay", s, j.Name)
	}

	if opts.Fault != nil {
		opts.Fault(FaultRerunExport)
	}
	res := &RerunResult{Job: j.Name, Snapshot: s, Replayed: len(chain)}
	if ckpt != nil {
		res.FromCheckpoint = ckpt.Snapshot
	}
	if opts.Deep {
		if res.Upstream, err = rerunUpstreams(ctx, d, snaps[len(snaps)-1], opts); err != nil {
			return nil, err
		}
	}
	want := filepath.Join(dir, "snapshot.csv")
	got := filepath.Join(dir, "rebuilt.csv")
	exp, err := export.Export(ctx, d, j, export.Options{Snapshot: s, Out: want, Format: job.FormatCSV})
	if err != nil {
		return nil, err
	}
	reb, err := export.Export(ctx, scratch, last, export.Options{Out: got, Format: job.FormatCSV})
	if err != nil {
		return nil, fmt.Errorf("rerun: export the rebuilt target: %w", err)
	}
	res.SHA256, res.Rebuilt, res.Rows = exp.SHA256, reb.SHA256, reb.Rows
	res.Reproduced = exp.SHA256 == reb.SHA256
	if !res.Reproduced {
		// DuckDB 1.5 wrote -0.0 as 0.0 out of EXCEPT ALL and INTERSECT
		// ALL, and so in idem's history rows; 2.0 keeps the sign. A
		// snapshot committed on 1.5 whose rows the rebuild gives with
		// each -0.0 written 0.0 is reproduced, and says so.
		old, err := catalog.Committed15(ctx, d.SQL(), j.Name, s)
		if err != nil {
			return nil, err
		}
		if old {
			zeros := filepath.Join(dir, "rebuilt-unsigned-zero.csv")
			unsigned, err := export.Export(ctx, scratch, last, export.Options{Out: zeros, Format: job.FormatCSV, UnsignedZero: true})
			if err != nil {
				return nil, fmt.Errorf("rerun: export the rebuilt target: %w", err)
			}
			if unsigned.SHA256 == exp.SHA256 {
				res.Reproduced, res.UnsignedZero, res.Rebuilt = true, true, unsigned.SHA256
			}
		}
	}
	if pk, err := catalog.ReadPacket(ctx, d.SQL(), j.Name, s); err == nil {
		for _, e := range pk.Erasures {
			res.ErasedBy = append(res.ErasedBy, e.Snapshot)
		}
	}
	if !res.Reproduced {
		diff, err := diff.DiffFilesDetail(ctx, want, got, job.FormatCSV, j.Pipeline.Key, diff.RerunRowsShown)
		if err != nil {
			return nil, err
		}
		diff.From.Path, diff.To.Path = fmt.Sprintf("snapshot %d", s), "rebuilt"
		res.Diff = diff
		if res.RebuiltPath, err = keepRebuilt(d.Path(), j.Name, s, got); err != nil {
			return nil, err
		}
	}
	return res, nil
}

// RerunKeptDir is the folder beside the database at dbPath where a rerun
// that does not reproduce keeps the rows it rebuilt; erase removes a job's
// files from it (they may hold the subject).
func RerunKeptDir(dbPath string) string { return dbPath + ".reruns" }

// RerunKeptPath is the file that keeps the rows a rerun of snapshot s of job
// rebuilt when they did not reproduce it.
func RerunKeptPath(dbPath, jobName string, s int64) string {
	return filepath.Join(RerunKeptDir(dbPath), fmt.Sprintf("%s-snapshot-%d-rebuilt.csv", jobName, s))
}

// keepRebuilt moves the rebuilt export out of the scratch folder (on the
// same file system) to RerunKeptPath, replacing an earlier one.
func keepRebuilt(dbPath, jobName string, s int64, rebuilt string) (string, error) {
	path := RerunKeptPath(dbPath, jobName, s)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return "", fmt.Errorf("rerun: keep the rebuilt rows: %w", err)
	}
	if err := os.Rename(rebuilt, path); err != nil {
		return "", fmt.Errorf("rerun: keep the rebuilt rows: %w", err)
	}
	return path, nil
}

// removeRerunKept removes the rows kept by reruns of job that did not
// reproduce (RerunKeptPath), for an erasure. A job's name is letters,
// digits and underscores, so the pattern matches no other job's files.
func removeRerunKept(dbPath, jobName string) error {
	files, err := filepath.Glob(filepath.Join(RerunKeptDir(dbPath), jobName+"-snapshot-*-rebuilt.csv"))
	if err != nil {
		return err
	}
	var errs []error
	for _, f := range files {
		if err := os.Remove(f); err != nil && !os.IsNotExist(err) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// replayChainIn replays chain in the scratch database: each batch or load
// from its retained inputs (jobs[i] is the job as it ran for chain[i]),
// each erasure and rollback as recorded. last is the job as it ran for the
// checkpoint loaded before chain, nil when none was. It returns the job of
// the last replayed run (or last), nil when there is none.
func replayChainIn(ctx context.Context, d, scratch *run.DB, chain []*catalog.SnapshotRow, jobs []*job.Job, erasures map[int64][]catalog.Erasure, dir string, last *job.Job, opts RerunOptions) (*job.Job, error) {
	for i, row := range chain {
		switch row.Kind {
		case report.KindErase:
			if last == nil {
				return nil, fmt.Errorf("rerun: snapshot %d is an erasure before any batch", row.Snapshot)
			}
			for _, e := range replayedErasures(erasures[row.Snapshot]) {
				if err := replayErasure(ctx, scratch, last, e); err != nil {
					return nil, fmt.Errorf("rerun: replay erasure of snapshot %d: %w", row.Snapshot, err)
				}
			}
		case report.KindRollback:
			if last == nil || row.Inputs.RollbackTo == nil {
				return nil, fmt.Errorf("rerun: snapshot %d is a rollback without a target snapshot", row.Snapshot)
			}
			if _, err := Rollback(ctx, scratch, last, *row.Inputs.RollbackTo, RollbackOptions{}); err != nil {
				return nil, fmt.Errorf("rerun: replay rollback of snapshot %d: %w", row.Snapshot, err)
			}
		case report.KindFullRefresh:
			if err := replayFullRefresh(ctx, d, scratch, jobs[i], row, erasures, filepath.Join(dir, fmt.Sprintf("refresh-%d", row.Snapshot)), opts); err != nil { // fullrefresh_apply.go
				return nil, err
			}
			last = jobs[i]
		default:
			if err := replayRun(ctx, d, scratch, jobs[i], row, filepath.Join(dir, fmt.Sprintf("in-%d", row.Snapshot)), opts); err != nil {
				return nil, err
			}
			last = jobs[i]
		}
	}
	return last, nil
}

// replayedErasures are the erasures of one erasure snapshot that a rerun
// replays: an erasure by subject records, at the same snapshot, the keys
// its rows had, which its replay records again; those are not replayed on
// their own (each would commit a snapshot of its own).
func replayedErasures(es []catalog.Erasure) []catalog.Erasure {
	var subjects []catalog.Erasure
	for _, e := range es {
		if e.Subject != nil {
			subjects = append(subjects, e)
		}
	}
	if len(subjects) > 0 {
		return subjects
	}
	return es
}

// replayChain is the snapshots a rebuild of the last one replays: all of an
// apply job's; a refresh job's from its last load (from the first snapshot
// when a rollback follows, as it may point further back).
func replayChain(j *job.Job, snaps []*catalog.SnapshotRow) []*catalog.SnapshotRow {
	return replayChainOf(j.Pipeline.Mode, snaps)
}

// replayChainOf is replayChain for a job of mode (its idem.jobs row's).
func replayChainOf(mode string, snaps []*catalog.SnapshotRow) []*catalog.SnapshotRow {
	if mode == pipeline.ModeApply {
		return snaps
	}
	start := 0
	for i, s := range snaps {
		// A load that replaced some partitions builds on the loads before
		// it: the chain starts at the last load of the whole target.
		if s.Kind == report.DecisionLoaded && !partitionedLoad(s) {
			start = i
		}
	}
	for _, s := range snaps[start:] {
		if s.Kind == report.KindRollback {
			return snaps
		}
	}
	return snaps[start:]
}

// partitionedLoad says a snapshot was committed by a job with [target]
// partition_by: it replaced some partitions, not the whole target. An
// incremental model's snapshot is the model rebuilt whole (its replay
// rebuilds it so), unless a run of it named --partitions.
func partitionedLoad(s *catalog.SnapshotRow) bool {
	if s.Inputs.Incremental != "" && len(s.Inputs.Partitions) == 0 {
		return false
	}
	parts, err := decodeParts(s.PartsJSON)
	if err != nil {
		return false
	}
	c, _ := parts.Config["partition_by"].(string)
	return c != ""
}

// jobAt is job as it ran for a snapshot: the recorded transform and schema
// versions (read through the job's pipeline and checked against the
// recorded sha256), params, target and input format.
func jobAt(ctx context.Context, q catalog.Querier, j *job.Job, row *catalog.SnapshotRow) (*job.Job, error) {
	parts, err := decodeParts(row.PartsJSON)
	if err != nil {
		return nil, fmt.Errorf("rerun: snapshot %d: parts: %w", row.Snapshot, err)
	}
	p := j.Pipeline
	if parts.Transform.Pipeline != p.Name {
		return nil, report.Refuse("rerun", "snapshot %d of %s was built by pipeline %s; the job now names pipeline %s", row.Snapshot, j.Name, parts.Transform.Pipeline, p.Name)
	}
	if j.IsModel() {
		return ModelAt(ctx, q, j, row, parts)
	}
	steps, err := p.Transform(parts.Transform.Version)
	if err != nil {
		return nil, report.Refuse("rerun", "snapshot %d of %s: %v", row.Snapshot, j.Name, err)
	}
	ddl, err := p.Schema(parts.Schema.Version)
	if err != nil {
		return nil, report.Refuse("rerun", "snapshot %d of %s: %v", row.Snapshot, j.Name, err)
	}
	at := *j
	// A rebuild in a scratch database replays the job's writes; it is not
	// one of the job's writers and is not fenced.
	at.Fencing = ""
	// Nor does it keep checkpoints: it reads the job's.
	at.Retention = job.Retention{}
	at.TransformVersion, at.Steps = parts.Transform.Version, steps
	at.SchemaVersion, at.DDL = parts.Schema.Version, ddl
	if t, ok := parts.Config["target"].(string); ok && t != "" {
		at.Table = t
	}
	if err := at.RestoreShape(parts.Config); err != nil {
		return nil, fmt.Errorf("rerun: snapshot %d of %s: %w", row.Snapshot, j.Name, err)
	}
	// The macros it ran with, which the transform part covers.
	withMacros, err := macrosAt(ctx, q, &at, row, parts)
	if err != nil {
		return nil, err
	}
	at = *withMacros
	// The same functions as a run's key parts: a generic pipeline's schema
	// part hashes the DDL expanded with the recorded columns.
	if got := at.TransformPart(); got.SHA256 != parts.Transform.SHA256 {
		return nil, report.Refuse("rerun", "snapshot %d of %s was built with transform v%d of %s with sha256 %s; its files now have sha256 %s: cannot rebuild it with other SQL",
			row.Snapshot, j.Name, parts.Transform.Version, p.Name, report.Short(parts.Transform.SHA256), report.Short(got.SHA256))
	}
	if got := at.SchemaPart(); got.SHA256 != parts.Schema.SHA256 {
		return nil, report.Refuse("rerun", "snapshot %d of %s was built with schema v%d of %s with sha256 %s; its file now has sha256 %s: cannot rebuild it with other DDL",
			row.Snapshot, j.Name, parts.Schema.Version, p.Name, report.Short(parts.Schema.SHA256), report.Short(got.SHA256))
	}
	format := row.Inputs.Format
	if f, ok := parts.Config["format"].(string); ok && f != "" {
		format = f
	}
	at.PartitionBy, _ = parts.Config["partition_by"].(string)
	at.Input = job.InputSpec{Format: format, Iceberg: j.Input.Iceberg} // where the lake is: not recorded
	// A job that read upstream jobs reads the ones it pinned.
	for _, ref := range parts.Upstream {
		at.Input.Upstream = append(at.Input.Upstream, ref.Job)
	}
	if e, ok := parts.Config["extra_columns"].(string); ok {
		at.Input.ExtraColumns = e
	}
	if m, ok := parts.Config["input_mode"].(map[string]any); ok {
		// A reference table ([input] mode = "replace") replaces its target
		// with each batch; a files-mode job's batches replay one by one.
		if mode, _ := m["mode"].(string); mode == job.InputModeReplace {
			at.Input.Mode = mode
		}
	}
	if c, ok := parts.Config["chunks"].(map[string]any); ok {
		// A chunked job replays chunk by chunk: each recorded chunk is
		// found again from its recorded start and size.
		rows, _ := fromJSON(c["rows"]).(int64)
		at.Input.ChunkRows = rows
		at.Input.Watermark, _ = c["watermark"].(string)
	}
	at.Params = map[string]any{}
	recorded, _ := parts.Config["params"].(map[string]any)
	for name, decl := range p.Params {
		v, ok := recorded[name]
		if !ok {
			return nil, fmt.Errorf("rerun: snapshot %d of %s: no recorded value for param %s", row.Snapshot, j.Name, name)
		}
		cv, err := pipeline.ConvertParam(decl.Type, fromJSON(v))
		if err != nil {
			return nil, fmt.Errorf("rerun: snapshot %d of %s: param %s: %w", row.Snapshot, j.Name, name, err)
		}
		at.Params[name] = cv
	}
	return &at, nil
}

// decodeParts decodes parts JSON keeping numbers exact.
func decodeParts(s string) (jobkey.Parts, error) {
	var p jobkey.Parts
	dec := json.NewDecoder(bytes.NewReader([]byte(s)))
	dec.UseNumber()
	err := dec.Decode(&p)
	return p, err
}

// fromJSON turns a decoded JSON value into the form TOML decoding gives
// (int64, float64, []any), so convertParam accepts it.
func fromJSON(v any) any {
	switch x := v.(type) {
	case json.Number:
		if n, err := x.Int64(); err == nil {
			return n
		}
		f, _ := x.Float64()
		return f
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = fromJSON(e)
		}
		return out
	}
	return v
}

// replayRun runs one recorded batch or load in the scratch database from
// the retained files, with the recorded batch id and bounds, and checks that
// it lands on the same snapshot number and reads the same bytes.
func replayRun(ctx context.Context, d *run.DB, scratch *run.DB, j *job.Job, row *catalog.SnapshotRow, linkDir string, ropts RerunOptions) error {
	progress := ropts.Progress
	files := row.Inputs.Files
	if pin, ok := source.ParseIcebergPin(row.Inputs.StreamID); ok && j.ReadsIceberg() {
		return replayIceberg(ctx, d, scratch, j, row, pin, ropts) // rerun_iceberg.go
	}
	if len(files) == 0 && !j.ReadsFiles() {
		return replayUpstream(ctx, d, scratch, j, row, linkDir, ropts)
	}
	if len(files) == 0 {
		return fmt.Errorf("rerun: snapshot %d of %s records no input file", row.Snapshot, j.Name)
	}
	paths := make([]string, len(files))
	for i, f := range files {
		// Never replay from a copy whose bytes are not the recorded ones.
		p, err := batchInput(ctx, d, j, f) // fullrefresh_apply.go
		if err != nil {
			return fmt.Errorf("rerun: snapshot %d of %s: %w", row.Snapshot, j.Name, err)
		}
		if p == "" {
			return fmt.Errorf("rerun: snapshot %d of %s: retained input %s (%s) is missing", row.Snapshot, j.Name, f.Name, report.Short(f.SHA256))
		}
		paths[i] = p
	}
	input := paths[0]
	if len(files) > 1 {
		// A glob over links named in the recorded order reads the files in
		// that order.
		if err := os.MkdirAll(linkDir, 0o755); err != nil {
			return err
		}
		for i := range files {
			src, err := filepath.Abs(paths[i])
			if err != nil {
				return err
			}
			if err := os.Symlink(src, filepath.Join(linkDir, fmt.Sprintf("%06d", i))); err != nil {
				return fmt.Errorf("rerun: %w", err)
			}
		}
		input = filepath.Join(linkDir, "*")
	}
	opts := run.RunOptions{Input: input, BatchID: row.BatchID, From: row.Inputs.Bounds.From, To: row.Inputs.Bounds.To, Progress: progress, Fault: ropts.Fault, SkipAudits: true,
		Partitions: row.Inputs.Partitions}
	if j.Pipeline.Mode != pipeline.ModeApply {
		opts.BatchID = ""
	}
	if j.Input.ChunkRows > 0 {
		resolved, err := source.Expand(ctx, input, progress)
		if err != nil {
			return fmt.Errorf("rerun: snapshot %d of %s: %w", row.Snapshot, j.Name, err)
		}
		opts.Source = &source.Files{Job: j, Listed: resolved, Chunk: &source.Chunk{Rows: j.Input.ChunkRows, From: row.Inputs.Bounds.From}}
		opts.From, opts.To = nil, nil
	}
	res, err := runReplay(ctx, scratch, j, opts)
	if err != nil {
		return fmt.Errorf("rerun: replay snapshot %d of %s: %w", row.Snapshot, j.Name, err)
	}
	for i, f := range res.Inputs {
		if i < len(files) && f.SHA256 != files[i].SHA256 {
			return fmt.Errorf("rerun: snapshot %d of %s: retained input %s has sha256 %s, recorded %s", row.Snapshot, j.Name, files[i].Name, report.Short(f.SHA256), report.Short(files[i].SHA256))
		}
	}
	if res.Decision != report.DecisionApplied && res.Decision != report.DecisionLoaded {
		return fmt.Errorf("rerun: replay of snapshot %d of %s was %s, not a commit", row.Snapshot, j.Name, res.Decision)
	}
	if j.Pipeline.Mode == pipeline.ModeApply && res.Snapshot != row.Snapshot {
		return fmt.Errorf("rerun: replay of snapshot %d of %s committed snapshot %d", row.Snapshot, j.Name, res.Snapshot)
	}
	return nil
}

// runReplay runs one recorded snapshot of j in the scratch database. A
// snapshot that run --full-refresh committed over an unchanged key (a
// model, a seed) replays as one: the run that the same key skips is run
// again with FullRefresh.
func runReplay(ctx context.Context, scratch *run.DB, j *job.Job, opts run.RunOptions) (*run.Result, error) {
	res, err := scratch.Run(ctx, j, opts)
	if err == nil && res.Decision == report.DecisionSkipped && run.FullRefreshes(j) && !opts.FullRefresh {
		opts.FullRefresh = true
		return scratch.Run(ctx, j, opts)
	}
	return res, err
}
