package run

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"time"

	"github.com/idem-dev/idem/internal/catalog"
	"github.com/idem-dev/idem/internal/job"
	"github.com/idem-dev/idem/internal/report"
	"github.com/idem-dev/idem/internal/source"
)

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
		return nil, report.Usage("job %s does not read a directory (set [input] mode = \"files\")", j.Name)
	}
	if opts.BatchID != "" || opts.From != nil {
		return nil, d.logError(j, "", report.Usage("a files-mode job names its batches after its files: --batch-id, --from and --to do not apply"))
	}
	fresh, st, err := d.pending(ctx, j, opts)
	if err != nil {
		return nil, d.logError(j, "", report.Canceled(ctx, err))
	}
	out := &FilesResult{Job: j.Name, Decision: report.DecisionSkipped, NewFiles: []string{}, Runs: []*Result{}}
	for _, f := range fresh {
		out.NewFiles = append(out.NewFiles, f.Path)
	}
	if len(fresh) == 0 {
		// Logged as a skipped run is: with the handle's next commit or
		// at Close (deferredLog).
		d.deferred.add(catalog.RunRow{Job: j.Name, Decision: report.DecisionSkipped, Changed: "[]",
			Snapshot: st.Snapshot, Cursor: st.Cursor, Epoch: st.Epoch, Message: "nothing new: no file that is not committed", At: time.Now()})
		return out, nil
	}
	batches := [][]source.InputFile{fresh}
	if j.Input.Batch != job.BatchAll {
		batches = batches[:0]
		for _, f := range fresh {
			batches = append(batches, []source.InputFile{f})
		}
	}
	for _, b := range batches {
		o := opts
		o.Source = &source.Files{Job: j, Listed: b}
		o.pending = true
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
		if res.Decision == report.DecisionApplied {
			out.Decision = report.DecisionApplied
		}
	}
	return out, nil
}

// Committed files are recorded in idem.files under their path relative to
// the job file's folder (see JobFilePath), and found again by file name:
// the name is the file's batch id and is unique in a listing, it does not
// depend on the working directory a job runs from, and it also finds the
// records of databases written before, whose paths were relative to the
// working directory of their run.

// recordFiles writes the file records of a files-mode batch, inside the
// run's transaction.
func recordFiles(ctx context.Context, tx *sql.Tx, j *job.Job, p *Prepared, res *Result) error {
	if j.Input.Mode != job.InputModeFiles {
		return nil
	}
	for _, f := range p.files {
		if r, ok := p.received[f.Path]; ok {
			f.SHA256, f.Size = r.SHA256, r.Size
		}
		if err := catalog.RecordFile(ctx, tx, j.Name, source.JobFilePath(j, f.Path), f.SHA256, f.Size, p.batchID, res.Snapshot); err != nil {
			return fmt.Errorf("record file %s: %w", f.Path, err)
		}
	}
	return nil
}

// pending lists the files of j's input that no batch committed, and reads
// j's state row, in one transaction that writes nothing.
func (d *DB) pending(ctx context.Context, j *job.Job, opts RunOptions) ([]source.InputFile, catalog.State, error) {
	tx, err := d.sql.BeginTx(ctx, nil)
	if err != nil {
		return nil, catalog.State{}, fmt.Errorf("begin: %w", err)
	}
	defer func() { _ = tx.Rollback() }()
	fresh, err := source.Pending(ctx, tx, j, opts.Input, opts.Progress)
	if err != nil {
		return nil, catalog.State{}, err
	}
	st, err := catalog.ReadState(ctx, tx, j.Name)
	return fresh, st, err
}
