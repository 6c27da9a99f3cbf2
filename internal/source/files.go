package source

import (
	"context"
	"database/sql"
	"path/filepath"
	"sort"

	"github.com/idem-dev/idem/internal/catalog"
	"github.com/idem-dev/idem/internal/job"
	"github.com/idem-dev/idem/internal/report"
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

// Pending lists the files of a files-mode job's input that are not
// committed yet, in name order, refusing a committed file that changed. q
// nil means a database without idem's tables: every file is new.
func Pending(ctx context.Context, q catalog.Querier, j *job.Job, input string, progress report.Progress) ([]InputFile, error) {
	pattern := j.Input.Path
	if input != "" {
		pattern = input
	}
	files, err := ResolveJob(ctx, j, input, progress)
	if err != nil {
		return nil, err
	}
	sort.SliceStable(files, func(i, j int) bool { return filepath.Base(files[i].Path) < filepath.Base(files[j].Path) })
	byName := map[string]string{}
	for _, f := range files {
		name := filepath.Base(f.Path)
		if other, ok := byName[name]; ok {
			return nil, report.Usage("input %s: files %s and %s share the name %s: batch ids are file names", pattern, other, f.Path, name)
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

// sameFile finds the record of recs with f's content.
func sameFile(recs []catalog.FileRecord, f InputFile) (catalog.FileRecord, bool) {
	for _, r := range recs {
		if r.SHA256 == f.SHA256 {
			return r, true
		}
	}
	return catalog.FileRecord{}, false
}

// JobFilePath is the path a file is recorded under: relative to the job
// file's folder, in slash form, whatever the working directory.
func JobFilePath(j *job.Job, p string) string {
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
	return report.Refuse("file", "file %s changed after it was committed in batch %s (snapshot %d): sha256 was %s, is now %s; a committed file never changes: put new rows in a new file",
		f.Path, rec.BatchID, rec.Snapshot, rec.SHA256[:12], f.SHA256[:12])
}

// CheckFiles refuses, inside the run's transaction, a batch of a
// files-mode job that holds a file already committed: the listing that
// chose it was read outside the transaction.
func CheckFiles(ctx context.Context, tx *sql.Tx, j *job.Job, files []InputFile) error {
	for _, f := range files {
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
		return report.Refuse("file", "file %s was already committed in batch %s (snapshot %d)", f.Path, rec.BatchID, rec.Snapshot)
	}
	return nil
}
