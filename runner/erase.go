package runner

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/idem-dev/idem/internal/dbfile"
	"github.com/idem-dev/idem/internal/env"
	"github.com/idem-dev/idem/internal/history"
	"github.com/idem-dev/idem/internal/job"
	"github.com/idem-dev/idem/internal/project"
	"github.com/idem-dev/idem/internal/report"
	"github.com/idem-dev/idem/internal/run"
	"github.com/idem-dev/idem/pipelines"
)

// EraseOptions say what Erase removes and how.
type EraseOptions struct {
	// Key is the key value to erase from the job named, one value for a
	// one-column key, COLUMN=VALUE for each column of a composite key;
	// Subject the value looked for in the jobs' [privacy] subject
	// columns. One of the two, not both.
	Key     []string
	Subject string
	// DryRun does the erasure and rolls it back: the result says what it
	// would change, and nothing else is touched (no environment dropped,
	// no compaction, no hook).
	DryRun bool
	// NoCompact leaves the database file uncompacted after the erasure:
	// its free blocks keep the erased rows' bytes until Compact.
	NoCompact bool
	// ExpectParent and Epoch guard the job named (not its readers) as a
	// Batch's guard a run.
	ExpectParent, Epoch *int64
	// Publishes says the caller's AfterCommit hooks publish every job
	// declaring [publish.iceberg] (idem-iceberg); without it such a job is
	// refused (ErrRefused) before anything changes, since its table would
	// keep serving the subject.
	Publishes bool
	// Dropped, when set, is called with the environments (idem env) of
	// the database dropped before the erasure, which may hold rows built
	// from the subject's; not called when there were none.
	Dropped func(database string, names []string)
}

// Erase removes a subject, as idem erase does, from the job file path
// names (a job's name among the working folder's job files too) or from
// every job of the project folder path that declares [privacy] subject
// (Subject only), and through the chain, in one transaction: from every
// job of the database that reads an erased job, transitively, found among
// the job files beside path (a reader with no job file there is refused,
// exit 2, before anything changes). A model is recomputed from its
// upstreams. Each job changed gets a new snapshot; the erasure journal
// beside the database records it. Unless DryRun, the database's
// environments are dropped first, and once the erasure commits the file
// is compacted (unless NoCompact) and the AfterCommit hooks are called
// for every job of path's folder. opts give the database's settings
// (WithDatabase: every job is taken to be of that database). A result
// returned beside an error is committed: the compaction failed (the
// erasure stands), a *CloseError or an *AfterCommitError.
func Erase(ctx context.Context, path string, eo EraseOptions, opts ...Option) (*ChainEraseResult, error) {
	p := &Project{}
	for _, o := range opts {
		if err := o.apply(&p.s); err != nil {
			return nil, jobError("", err)
		}
	}
	dir := isDir(path)
	roots, beside, err := p.eraseJobs(path, len(eo.Key) > 0)
	if err != nil {
		return nil, jobError("", err)
	}
	p.p = &project.Project{Jobs: slices.Concat(roots, beside)}
	var key string
	if len(eo.Key) > 0 {
		if key, err = history.KeyOf(roots[0], eo.Key); err != nil {
			return nil, jobError("", err)
		}
	}
	dbPath, oo, err := p.database(roots[0])
	if err != nil {
		return nil, jobError("", err)
	}
	db, err := run.Open(ctx, dbPath, oo)
	if err != nil {
		return nil, jobError("", err)
	}
	opts2 := history.EraseOptions{Key: key, Subject: eo.Subject, DryRun: eo.DryRun, AnyRoot: dir, Fault: p.faultFor(db.Path()),
		Publishes: eo.Publishes, ExpectParent: eo.ExpectParent, Epoch: eo.Epoch}
	res, err := p.eraseOn(ctx, db, dbPath, roots, beside, opts2, eo)
	if err != nil {
		return res, jobError("", errors.Join(err, db.Close()))
	}
	if err := p.closeWritten("", db); err != nil {
		return res, err
	}
	if eo.DryRun {
		return res, nil
	}
	// Every job of the folder: the jobs named and those beside them that
	// may read them.
	seen := map[string]bool{}
	for _, j := range p.p.Jobs {
		if seen[j.Name] {
			continue
		}
		seen[j.Name] = true
		if err := p.afterCommit(ctx, Commit{Job: j.Name, Verb: "erase", Snapshot: res.snapshotOf(j.Name), Committed: true}); err != nil {
			return res, err
		}
	}
	return res, nil
}

// eraseOn is Erase on db, the database opened for writing: the
// environments dropped, the erasure, the compaction.
func (p *Project) eraseOn(ctx context.Context, db *run.DB, dbPath string, roots, beside []*job.Job, opts history.EraseOptions, eo EraseOptions) (*ChainEraseResult, error) {
	if err := history.RefuseUnpublished(roots, beside, opts); err != nil {
		return nil, err // before the environments are dropped
	}
	if !eo.DryRun {
		// What environments built from production may hold the subject:
		// they go first (idem run --env rebuilds them).
		dropped, err := env.DropEnvironments(dbPath)
		if err != nil {
			return nil, fmt.Errorf("drop the environments of %s before the erasure: %w", dbPath, err)
		}
		if len(dropped) > 0 && eo.Dropped != nil {
			eo.Dropped(dbPath, dropped)
		}
	}
	res, err := history.EraseChain(ctx, db, roots, beside, opts)
	if err != nil {
		return nil, err
	}
	_, oo, _ := p.database(roots[0])
	res.Compact, err = p.compactErased(ctx, db, oo, res.Changed(), eo.NoCompact)
	var out ChainEraseResult
	if cerr := convert(res, &out); cerr != nil {
		return nil, errors.Join(err, cerr)
	}
	out.Database, out.changed = db.Path(), res.Changed()
	return &out, err
}

// compactErased compacts the database after an erasure that changed it
// (history.CompactAfterErasure), so that no byte of the subject stays in the
// file's free blocks; not with skip.
func (p *Project) compactErased(ctx context.Context, db *run.DB, oo run.OpenOptions, changed, skip bool) (*dbfile.CompactResult, error) {
	if !changed || skip {
		return nil, nil
	}
	return history.CompactAfterErasure(ctx, db, dbfile.CompactOptions{Open: oo, Fault: p.faultFor(db.Path())})
}

// eraseJobs are the jobs an erasure starts from and the job files its
// readers are looked for among: path and the job files beside it (those
// that load), or every job of the folder path that declares [privacy]
// subject and the folder's jobs. With WithDatabase every job is taken to
// be of that database.
func (p *Project) eraseJobs(path string, byKey bool) (roots, beside []*job.Job, err error) {
	if isDir(path) {
		if byKey {
			return nil, nil, &report.UsageError{Msg: "erase of a project folder takes --subject VALUE: --key is the key of one job"}
		}
		if beside, err = loadFolder(path); err != nil {
			return nil, nil, err
		}
		for _, j := range beside {
			if len(j.Privacy.Subject) > 0 {
				roots = append(roots, j)
			}
		}
		if len(roots) == 0 {
			return nil, nil, &report.UsageError{Msg: fmt.Sprintf("erase: no job in %s declares [privacy] subject (the columns that name a subject)", path)}
		}
	} else {
		j, err := loadJob(path)
		if err != nil {
			return nil, nil, err
		}
		roots = []*job.Job{j}
		files, _ := project.Files([]string{filepath.Dir(path)})
		for _, file := range files {
			if uj, err := loadJob(file); err == nil && uj.Name != j.Name {
				beside = append(beside, uj)
			}
		}
	}
	for _, j := range slices.Concat(roots, beside) {
		if p.s.database != "" {
			j.Database = p.s.database
		}
	}
	dbs := map[string]bool{}
	for _, j := range roots {
		dbs[absPath(j.Database)] = true
	}
	if len(dbs) > 1 {
		return nil, nil, &report.UsageError{Msg: fmt.Sprintf("erase: the jobs of %s that declare [privacy] subject use %d databases: erase one database at a time (--db, or one job file)", path, len(dbs))}
	}
	return roots, beside, nil
}

// loadFolder loads every job file of the folder dir; one that does not
// load is the error.
func loadFolder(dir string) ([]*job.Job, error) {
	files, err := project.Files([]string{dir})
	if err != nil {
		return nil, err
	}
	var jobs []*job.Job
	for _, file := range files {
		j, err := loadJob(file)
		if err != nil {
			return nil, err
		}
		jobs = append(jobs, j)
	}
	return jobs, nil
}

// loadJob loads the job file pathOrName names (JobFile).
func loadJob(pathOrName string) (*job.Job, error) {
	file, err := JobFile(pathOrName)
	if err != nil {
		return nil, err
	}
	return run.LoadJob(file, pipelines.FS)
}

func isDir(path string) bool {
	st, err := os.Stat(path)
	return err == nil && st.IsDir()
}

// ReplayJournal applies again, as idem erase --replay-journal does, the
// erasures the journal beside the database records and the database lacks
// (a database restored from a copy taken before them), each through the
// chain: the erased values are found again by their salted hash. path is
// a job file (its readers looked for beside it) or a project folder; the
// database is the first job's (WithDatabase's). The file is compacted
// after, unless noCompact. No AfterCommit hook is called. A result
// returned beside an error is committed (a *CloseError).
func ReplayJournal(ctx context.Context, path string, noCompact bool, opts ...Option) (*JournalReplay, error) {
	p := &Project{}
	for _, o := range opts {
		if err := o.apply(&p.s); err != nil {
			return nil, jobError("", err)
		}
	}
	var jobs []*job.Job
	if isDir(path) {
		var err error
		if jobs, err = loadFolder(path); err != nil {
			return nil, jobError("", err)
		}
		for _, j := range jobs {
			if p.s.database != "" {
				j.Database = p.s.database
			}
		}
	} else {
		roots, beside, err := p.eraseJobs(path, false)
		if err != nil {
			return nil, jobError("", err)
		}
		jobs = append(roots, beside...)
	}
	dbPath, oo, err := p.database(jobs[0])
	if err != nil {
		return nil, jobError("", err)
	}
	oo.Journal = run.JournalSkip
	db, err := run.Open(ctx, dbPath, oo)
	if err != nil {
		return nil, jobError("", err)
	}
	res, err := history.ReplayJournal(ctx, db, jobs, p.faultFor(db.Path()))
	if err == nil {
		oo.Journal = run.JournalCheck // the compacted file is opened as any other
		res.Compact, err = p.compactErased(ctx, db, oo, len(res.Replayed) > 0, noCompact)
	}
	if err != nil {
		return nil, jobError("", errors.Join(err, db.Close()))
	}
	out := &JournalReplay{Database: db.Path()}
	if err := convert(res, out); err != nil {
		return nil, jobError("", errors.Join(err, db.Close()))
	}
	return out, p.closeWritten("", db)
}
