package runner

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"sort"

	"github.com/idem-dev/idem/runner/catalog"

	"github.com/idem-dev/idem/runner/job"
)

// Directory source: [input] mode = "files".
//
// Each run lists the files the input pattern matches, in name order, and
// takes those not yet committed for the job. A file is committed with its
// record in idem.files (path, sha256, batch, snapshot) in the same
// transaction as its rows, so a crash between two files leaves the first
// committed and the second not: the next run takes exactly the second.
// With batch = "per_file" every file is its own batch (batch id = the file
// name), transaction and snapshot; with batch = "all" the new files of a run
// form one batch (batch id = the file name, or "<first>..<last>" for
// several). A committed file whose content has changed since is refused
// (exit 3) and named, and nothing is applied.

// FaultBeforeFile is the fault point passed before each file of a
// per-file run, followed by the file name.
const FaultBeforeFile = "before_file:"

// FilesResult is what a run of a files-mode job reports: one Result per
// batch applied. Decision is "applied" when a batch was applied and
// "skipped" when no file was new.
type FilesResult struct {
	Job      string    `json:"job"`
	Decision string    `json:"decision"`
	NewFiles []string  `json:"new_files"`
	Runs     []*Result `json:"runs"`
}

// RunFiles runs a files-mode job: every new file once, in name order. It
// returns the batches applied before an error together with the error.
// Every invocation is in the run log: each batch as its run, and a run that
// found nothing new or stopped before its first batch (a committed file
// that changed, an input that cannot be listed) as one entry.
func (d *DB) RunFiles(ctx context.Context, j *job.Job, opts RunOptions) (*FilesResult, error) {
	if j.Input.Mode != job.InputModeFiles {
		return nil, job.Usage("job %s does not read a directory (set [input] mode = \"files\")", j.Name)
	}
	if opts.BatchID != "" || opts.From != nil {
		return nil, d.logError(j, "", job.Usage("a files-mode job names its batches after its files: --batch-id, --from and --to do not apply"))
	}
	fresh, err := pendingFiles(ctx, d.sql, j, opts)
	if err != nil {
		return nil, d.logError(j, "", job.Canceled(ctx, err))
	}
	out := &FilesResult{Job: j.Name, Decision: job.DecisionSkipped, NewFiles: []string{}, Runs: []*Result{}}
	for _, f := range fresh {
		out.NewFiles = append(out.NewFiles, f.Path)
	}
	if len(fresh) == 0 {
		d.logInvocation(j, "", job.DecisionSkipped, "nothing new: no file that is not committed")
		return out, nil
	}
	batches := [][]InputFile{fresh}
	if j.Input.Batch != job.BatchAll {
		batches = batches[:0]
		for _, f := range fresh {
			batches = append(batches, []InputFile{f})
		}
	}
	for _, b := range batches {
		o := opts
		o.files = b
		o.BatchID = filepath.Base(b[0].Path)
		if len(b) > 1 {
			o.BatchID += ".." + filepath.Base(b[len(b)-1].Path)
		}
		fault(opts, FaultBeforeFile+filepath.Base(b[0].Path))
		res, err := d.Run(ctx, j, o)
		if err != nil {
			return out, err
		}
		out.Runs = append(out.Runs, res)
		if res.Decision == job.DecisionApplied {
			out.Decision = job.DecisionApplied
		}
	}
	return out, nil
}

// pendingFiles lists the files of a files-mode job's input that are not
// committed yet, in name order, refusing a committed file that changed. q
// nil means a database without idem's tables: every file is new.
func pendingFiles(ctx context.Context, q catalog.Querier, j *job.Job, opts RunOptions) ([]InputFile, error) {
	pattern := j.Input.Path
	if opts.Input != "" {
		pattern = opts.Input
	}
	files, err := resolveJobInput(ctx, j, opts.Input, opts.Progress)
	if err != nil {
		return nil, err
	}
	sort.SliceStable(files, func(i, j int) bool { return filepath.Base(files[i].Path) < filepath.Base(files[j].Path) })
	byName := map[string]string{}
	for _, f := range files {
		name := filepath.Base(f.Path)
		if other, ok := byName[name]; ok {
			return nil, job.Usage("input %s: files %s and %s share the name %s: batch ids are file names", pattern, other, f.Path, name)
		}
		byName[name] = f.Path
	}
	committed := map[string][]catalog.FileRecord{}
	if q != nil {
		if committed, err = catalog.CommittedFiles(ctx, q, j.Name); err != nil {
			return nil, err
		}
	}
	var fresh []InputFile
	for _, f := range files {
		recs := committed[filepath.Base(f.Path)]
		if len(recs) == 0 {
			fresh = append(fresh, f)
		} else if _, same := sameFile(recs, f); !same {
			return nil, changedFile(f, recs[0])
		}
	}
	return fresh, nil
}

// planInputMode fills in the plan of a files-mode or chunked job. db is nil
// when the database or idem's tables do not exist yet.
func planInputMode(ctx context.Context, db *DB, j *job.Job, opts RunOptions, plan *Plan) error {
	switch {
	case j.Input.Mode == job.InputModeFiles:
		var q catalog.Querier
		if db != nil {
			q = db.sql
		}
		fresh, err := pendingFiles(ctx, q, j, opts)
		if err != nil {
			if errors.Is(err, job.ErrRefused) {
				plan.Decision, plan.Reason = "refuse", err.Error()
				return nil
			}
			return err
		}
		plan.BatchID = ""
		plan.NewFiles = []string{}
		for _, f := range fresh {
			plan.NewFiles = append(plan.NewFiles, f.Path)
		}
		plan.Decision = "apply"
		if len(fresh) == 0 {
			plan.Decision = "skip"
		}
		plan.Reason = fmt.Sprintf("%d new file(s), batch = %s", len(fresh), j.Input.Batch)
	case j.Input.ChunkRows > 0:
		plan.BatchID = ""
		plan.Decision = "apply"
		plan.Reason = fmt.Sprintf("chunks of %d rows by %s from the start of the input", j.Input.ChunkRows, j.Input.Watermark)
		if db != nil {
			started, cursor, err := catalog.ChunkStart(ctx, db.sql, j.Name)
			if err != nil {
				return err
			}
			if started {
				plan.Reason = fmt.Sprintf("chunks of %d rows by %s after watermark %d (skipped when nothing lies past it)", j.Input.ChunkRows, j.Input.Watermark, cursor)
			}
		}
	}
	return nil
}

// Committed files are recorded in idem.files under their path relative to
// the job file's folder (see jobFilePath), and found again by file name:
// the name is the file's batch id and is unique in a listing, it does not
// depend on the working directory a job runs from, and it also finds the
// records of databases written before, whose paths were relative to the
// working directory of their run.

// sameFile finds the record of recs with f's content.
func sameFile(recs []catalog.FileRecord, f InputFile) (catalog.FileRecord, bool) {
	for _, r := range recs {
		if r.SHA256 == f.SHA256 {
			return r, true
		}
	}
	return catalog.FileRecord{}, false
}

// jobFilePath is the path a file is recorded under: relative to the job
// file's folder, in slash form, whatever the working directory.
func jobFilePath(j *job.Job, p string) string {
	abs, err1 := filepath.Abs(p)
	dir, err2 := filepath.Abs(filepath.Dir(j.File))
	if err1 == nil && err2 == nil {
		if rel, err := filepath.Rel(dir, abs); err == nil {
			return filepath.ToSlash(rel)
		}
	}
	return filepath.ToSlash(filepath.Clean(p))
}

func changedFile(f InputFile, rec catalog.FileRecord) error {
	return job.Refuse("file", "file %s changed after it was committed in batch %s (snapshot %d): sha256 was %s, is now %s; a committed file never changes: put new rows in a new file",
		f.Path, rec.BatchID, rec.Snapshot, rec.SHA256[:12], f.SHA256[:12])
}

// checkInputMode is the in-transaction guard of directory and chunked
// inputs: a file of the batch must not be committed already (the listing
// that chose it was read outside the transaction), and a chunk must start
// where the job's last chunk ended.
func checkInputMode(ctx context.Context, tx *sql.Tx, j *job.Job, p *prepared, st catalog.State, opts RunOptions) error {
	if opts.chunk != nil {
		return checkChunk(ctx, tx, j, st, opts.chunk)
	}
	if j.Input.Mode != job.InputModeFiles {
		return nil
	}
	for _, f := range p.files {
		recs, err := catalog.CommittedFile(ctx, tx, j.Name, filepath.Base(f.Path))
		if err != nil {
			return err
		}
		if len(recs) == 0 {
			continue
		}
		rec, same := sameFile(recs, f)
		if !same {
			return changedFile(f, recs[0])
		}
		return job.Refuse("file", "file %s was already committed in batch %s (snapshot %d)", f.Path, rec.BatchID, rec.Snapshot)
	}
	return nil
}

// recordFiles writes the file records of a files-mode batch, inside the
// run's transaction.
func recordFiles(ctx context.Context, tx *sql.Tx, j *job.Job, p *prepared, res *Result) error {
	if j.Input.Mode != job.InputModeFiles {
		return nil
	}
	for _, f := range p.files {
		if err := catalog.RecordFile(ctx, tx, j.Name, jobFilePath(j, f.Path), f.SHA256, f.Size, p.batchID, res.Snapshot); err != nil {
			return fmt.Errorf("record file %s: %w", f.Path, err)
		}
	}
	return nil
}
