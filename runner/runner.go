package runner

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/idem-dev/idem/internal/export"
	"github.com/idem-dev/idem/internal/history"
	"github.com/idem-dev/idem/internal/job"
	"github.com/idem-dev/idem/internal/jobkey"
	"github.com/idem-dev/idem/internal/planner"
	"github.com/idem-dev/idem/internal/project"
	"github.com/idem-dev/idem/internal/projectrun"
	"github.com/idem-dev/idem/internal/report"
	"github.com/idem-dev/idem/internal/run"
	"github.com/idem-dev/idem/internal/sqltext"
	"github.com/idem-dev/idem/pipelines"
)

// Project is a set of job files opened together, in run order: each job
// after the jobs of the project it reads as upstreams. It holds no open
// database: each call opens what it needs and closes it before it returns,
// so another process (the idem command) can write between two calls. A
// Project is safe for use by one goroutine at a time.
type Project struct {
	p *project.Project
	s settings
}

// Open reads the job files paths name, as idem run takes them: a file as
// it is, a folder as every *.toml file directly in it. It validates every
// job file and orders the jobs; nothing is opened or written. Errors: a job
// file that cannot be used (ErrJobFile, naming the file, line and key), a
// bad option, two jobs of one name in one database, a cycle of upstreams,
// or a WithSelect name that is no job (ErrUsage).
func Open(ctx context.Context, paths []string, opts ...Option) (*Project, error) {
	s := settings{concurrency: 1}
	for _, o := range opts {
		if err := o.apply(&s); err != nil {
			return nil, jobError("", err)
		}
	}
	if len(paths) == 0 {
		return nil, jobError("", report.Usage("Open: no job file or folder"))
	}
	files, skipped, err := project.FilesSkipping(paths)
	if s.skipped != nil {
		for _, f := range skipped {
			s.skipped(f)
		}
	}
	if err != nil {
		return nil, jobError("", err)
	}
	var jobs []*job.Job
	for _, f := range files {
		if ctx.Err() != nil {
			return nil, jobError("", report.ErrCanceled) // nothing was opened
		}
		j, err := run.LoadJob(f, pipelines.FS)
		if err != nil {
			return nil, jobError("", err)
		}
		jobs = append(jobs, j)
	}
	all, err := project.New(jobs)
	if err != nil {
		return nil, jobError("", err)
	}
	p, err := all.Choose(project.Selection{Select: s.selects, Exclude: s.excludes}, func() (map[*job.Job]bool, error) {
		return modifiedJobs(ctx, all)
	})
	if err != nil {
		return nil, jobError("", err)
	}
	return &Project{p: p, s: s}, nil
}

// modifiedJobs are the jobs the selector state:modified picks: those a
// plan says would be rebuilt because their definition changed (their
// key's transform, schema or config part), or that never committed,
// whatever their inputs do. Each is planned against its own database (the
// job file's), read-only.
func modifiedJobs(ctx context.Context, p *project.Project) (map[*job.Job]bool, error) {
	out := map[*job.Job]bool{}
	for _, j := range p.Jobs {
		plan, err := planner.PlanRun(ctx, j.Database, j, run.RunOptions{}, run.OpenOptions{DuckDB: j.DuckDB})
		if err != nil {
			return nil, fmt.Errorf("--select state:modified: plan %s: %w", j.Name, err)
		}
		out[j] = plan.FirstLoad || slices.ContainsFunc(plan.Changed, func(part string) bool {
			return part == jobkey.PartTransform || part == jobkey.PartSchema || part == jobkey.PartConfig
		})
	}
	return out, nil
}

// JobFile is the job file pathOrName names, as every idem command that
// takes one JOB reads it: a path that exists (or that cannot be a job's
// name) as it is; otherwise the name of a job defined by one of the job
// files of the working folder (idem show daily). Errors (ErrUsage): no
// such file and no such job, a job defined by several files; a job file of
// that name that cannot be used is its own error (ErrJobFile).
func JobFile(pathOrName string) (string, error) {
	if _, err := os.Stat(pathOrName); err == nil || !sqltext.Identifier.MatchString(pathOrName) {
		return pathOrName, nil
	}
	name := pathOrName
	files, err := project.Files([]string{"."})
	if err != nil {
		return "", jobError("", &report.UsageError{Msg: fmt.Sprintf("no job file %s, and no job named %s here: %v", name, name, err)})
	}
	var found []string
	for _, f := range files {
		j, err := run.LoadJob(f, pipelines.FS)
		if err != nil {
			if strings.TrimSuffix(filepath.Base(f), ".toml") == name {
				return "", jobError("", err) // the job's own file is bad: say why
			}
			continue
		}
		if j.Name == name {
			found = append(found, j.File)
		}
	}
	switch len(found) {
	case 0:
		return "", jobError("", &report.UsageError{Msg: fmt.Sprintf("no job file %s, and no job named %s among the job files of this folder: give a job file's path", name, name)})
	case 1:
		return found[0], nil
	}
	return "", jobError("", &report.UsageError{Msg: fmt.Sprintf("job %s is defined by several job files of this folder (%s): give one's path", name, strings.Join(found, ", "))})
}

// Jobs names the project's jobs in run order.
func (p *Project) Jobs() []string {
	names := make([]string, len(p.p.Jobs))
	for i, j := range p.p.Jobs {
		names[i] = j.Name
	}
	return names
}

// job finds the project's job called name.
func (p *Project) job(name string) (*job.Job, error) {
	for _, j := range p.p.Jobs {
		if j.Name == name {
			return j, nil
		}
	}
	return nil, jobError(name, report.Usage("no job %q in the project (jobs: %s)", name, strings.Join(p.Jobs(), ", ")))
}

// database is the database file job j uses, and how it is opened.
func (p *Project) database(j *job.Job) (string, run.OpenOptions, error) {
	d := j.DuckDB
	if o := p.s.duckdb; o.MemoryLimit != "" {
		d.MemoryLimit = o.MemoryLimit
	}
	if o := p.s.duckdb; o.Threads > 0 {
		d.Threads = o.Threads
	}
	if o := p.s.duckdb; o.TempDirectory != "" {
		d.TempDirectory = o.TempDirectory
	}
	opts := run.OpenOptions{DuckDB: d, Wait: p.s.wait}
	if p.s.database != "" {
		return p.s.database, opts, nil
	}
	return j.Database, opts, j.CheckDatabase()
}

// RunJob runs job name once with the batch b, as idem run JOB does: in one
// transaction that commits the target, its outcomes, the ledger, the state
// and a new snapshot, or commits nothing. A files-mode job applies each new
// file as its own batch (its own transaction) and a chunked job each
// chunk; a stream job one batch past its committed positions, or as
// WithStream says (batch after batch with Follow). The error is
// a *JobError: ErrRefused for a guard (nothing committed), ErrLocked,
// ErrUsage for a bad Batch, ErrCanceled when ctx ended. A files-mode or
// chunked run that fails after committing batches returns its Result (with
// those batches in Runs) beside the error.
func (p *Project) RunJob(ctx context.Context, name string, b Batch) (*Result, error) {
	j, err := p.job(name)
	if err != nil {
		return nil, err
	}
	opts, err := b.options()
	if err != nil {
		return nil, jobError(name, err)
	}
	res, err := p.runJob(ctx, nil, j, opts)
	var ce *CloseError
	if err != nil && !errors.As(err, &ce) {
		// What a files-mode or chunked run committed before it failed
		// stands: the hooks follow it.
		if res != nil && commitOf(res).Committed {
			return res, errors.Join(jobError(name, err), p.afterCommit(ctx, commitOf(res)))
		}
		return res, jobError(name, err)
	}
	return res, errors.Join(jobError(name, err), p.afterCommit(ctx, commitOf(res)))
}

// commitOf is the Commit of a run's result.
func commitOf(r *Result) Commit {
	c := Commit{Job: r.Job, Verb: "run", Snapshot: r.Snapshot, Committed: r.Decision.Committed()}
	for _, b := range r.Runs {
		c.Snapshot = max(c.Snapshot, b.Snapshot)
		c.Committed = c.Committed || b.Decision.Committed()
	}
	return c
}

// runJob runs j with opts on its database, from h (nil: opened and
// closed here). A database that fails to close after a run that
// succeeded is a *CloseError returned beside the result.
func (p *Project) runJob(ctx context.Context, h *projectrun.Handles, j *job.Job, opts run.RunOptions) (*Result, error) {
	if err := p.s.stream.check(j.IsStream(), j.Name); err != nil {
		return nil, err
	}
	path, oo, err := p.database(j)
	if err != nil {
		return nil, err
	}
	if p.s.fullRefresh && run.FullRefreshes(j) {
		opts.FullRefresh = true
	}
	return p.runOn(ctx, h, j, path, oo, opts)
}

// runOn runs j with opts on the database at path, opened with oo.
func (p *Project) runOn(ctx context.Context, h *projectrun.Handles, j *job.Job, path string, oo run.OpenOptions, opts run.RunOptions) (res *Result, err error) {
	// A writable open of an older database migrates it (fault points
	// migrate_before_commit, migrate_after_commit).
	oo.Fault = p.faultFor(path)
	opts.Fault, opts.Progress, opts.SkipHistory = p.faultFor(path), p.s.progress, p.s.skipHistory
	doneOpen := timing(p.s.progress, "open")
	db, done, err := h.Open(ctx, path, oo)
	doneOpen()
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			err = errors.Join(err, done(err))
			return
		}
		doneClose := timing(p.s.progress, "close")
		cerr := done(nil)
		doneClose()
		if cerr != nil {
			err = &CloseError{Path: db.Path(), Err: errors.Unwrap(cerr)}
		}
	}()
	res, err = p.dispatch(ctx, db, j, opts)
	if p.s.noSHA256 {
		return res, err
	}
	if serr := fillSHA256(ctx, db, j, res); serr != nil && err == nil {
		err = serr
	}
	return res, err
}

// timing starts a step that only Progress.Timings reports (the open and
// close of a run's database).
func timing(p report.Progress, name string) func() {
	if !p.Timings {
		return func() {}
	}
	return p.Start(name)
}

// fillSHA256 sets the SHA256 of res and of its Runs that committed a
// snapshot (Decision.Committed), reading each snapshot back.
func fillSHA256(ctx context.Context, db *run.DB, j *job.Job, res *Result) error {
	if res == nil {
		return nil
	}
	for _, r := range res.Runs {
		if err := fillSHA256(ctx, db, j, r); err != nil {
			return err
		}
	}
	if !res.Decision.Committed() || res.Runs != nil || res.Snapshot == 0 {
		return nil
	}
	dir, release, err := run.NewScratchDir(db.Path())
	if err != nil {
		return fmt.Errorf("sha256 of snapshot %d: %w", res.Snapshot, err)
	}
	defer release()
	ex, err := export.Export(ctx, db, j, export.Options{Snapshot: res.Snapshot, Out: filepath.Join(dir, "snapshot.csv"), Format: job.FormatCSV})
	if err != nil {
		return fmt.Errorf("sha256 of snapshot %d: %w", res.Snapshot, err)
	}
	res.SHA256 = ex.SHA256
	return nil
}

// dispatch runs j with opts on db as its kind of input wants: a stream as
// WithStream says (stream.go), a files-mode job each new file, a chunked
// job each chunk, any other job one batch.
func (p *Project) dispatch(ctx context.Context, db *run.DB, j *job.Job, opts run.RunOptions) (*Result, error) {
	switch {
	case j.IsStream():
		return p.runStream(ctx, db, j, opts)
	case j.Input.Mode == job.InputModeFiles && !opts.FullRefresh:
		fr, err := db.RunFiles(ctx, j, opts)
		if fr == nil {
			return nil, err
		}
		runs, cerr := resultsOf(fr.Runs)
		return &Result{Job: fr.Job, Decision: Decision(fr.Decision), NewFiles: fr.NewFiles, Runs: runs}, errors.Join(err, cerr)
	case j.Input.ChunkRows > 0 && !opts.FullRefresh:
		cr, err := db.RunChunks(ctx, j, opts)
		if cr == nil {
			return nil, err
		}
		runs, cerr := resultsOf(cr.Runs)
		return &Result{Job: cr.Job, Decision: Decision(cr.Decision), Runs: runs, Watermark: cr.Watermark}, errors.Join(err, cerr)
	}
	r, err := history.Run(ctx, db, j, opts) // an apply job's full refresh: history.FullRefreshApply
	if err != nil {
		return nil, err
	}
	return resultOf(r)
}

// Run runs every job of the project once, in run order, each as RunJob
// with the zero Batch would, in its own transaction: a job after the jobs
// it reads, which it reads as they committed. A job downstream of one that
// failed or was refused is not run (Decision blocked); the others still
// run. Jobs whose upstreams are done run at once up to WithConcurrency;
// WithEachJob hears of each in run order as it is done. It returns one
// Result per job in run order, and, when any job failed or was refused, a
// *PartialError naming them (ExitCode gives the worst exit code). The jobs
// that committed stay committed; the AfterCommit hooks follow once every
// job is done and the databases are closed.
func (p *Project) Run(ctx context.Context) ([]*Result, error) {
	out, failed, closeErr := p.runAll(ctx, func(ctx context.Context, h *projectrun.Handles, j *job.Job) (*Result, error) {
		opts, _ := Batch{}.options()
		return p.runJob(ctx, h, j, opts)
	}, func(_ *job.Job, r *Result, err error) {
		if p.s.each != nil {
			p.s.each(r, err)
		}
	})
	var hookErrs []error
	for _, r := range out {
		// What a files-mode or chunked job committed before it failed
		// stands: the hooks follow it too.
		if r.Decision != DecisionBlocked && (r.Error == "" || commitOf(r).Committed) {
			hookErrs = append(hookErrs, p.afterCommit(ctx, commitOf(r)))
		}
	}
	if err := partial(failed, closeErr); err != nil {
		return out, errors.Join(append([]error{err}, hookErrs...)...)
	}
	return out, errors.Join(hookErrs...)
}

// runAll runs every job of the project through one, in its own
// transaction, as Run says, on the databases of one set of handles,
// closed before it returns; each hears of every job in run order as soon
// as it and the jobs before it are done. A job one returns no Result for
// (nil, nil) is done and left out of out. It returns the jobs' Results
// in run order, the jobs that failed and the error of closing the
// databases.
func (p *Project) runAll(ctx context.Context, one func(context.Context, *projectrun.Handles, *job.Job) (*Result, error),
	each func(*job.Job, *Result, error)) (out []*Result, failed []*JobError, closeErr error) {
	h := projectrun.NewHandles()
	results := make(map[*job.Job]*Result, len(p.p.Jobs))
	var mu sync.Mutex
	done := inOrder(p.p.Jobs, func(j *job.Job) {
		mu.Lock()
		r := results[j]
		mu.Unlock()
		var err error
		if r != nil && r.Error != "" {
			err = &JobError{Job: r.Job, Code: r.ExitCode, Err: r.err}
		}
		each(j, r, err)
	})
	outcomes := projectrun.Run(ctx, p.p, p.s.concurrency, func(ctx context.Context, j *job.Job, _ map[string]string) (string, error) {
		res, err := one(ctx, h, j)
		r := failedResult(j, res, err)
		mu.Lock()
		results[j] = r
		mu.Unlock()
		done(j)
		if err != nil || res == nil {
			return "", err
		}
		return string(res.Decision), nil
	}, func(j *job.Job, by []string) {
		mu.Lock()
		results[j] = &Result{Job: j.Name, Decision: DecisionBlocked, Changed: []string{}, BlockedBy: by}
		mu.Unlock()
		done(j)
	})
	closeErr = h.Close()
	for _, oc := range outcomes {
		if r := results[oc.Job]; r != nil {
			out = append(out, r)
		}
		if oc.Err != nil {
			failed = append(failed, jobError(oc.Job.Name, oc.Err).(*JobError))
		}
	}
	return out, failed, closeErr
}

// failedResult is the Result of job j of a project run that returned res
// and err: res, or when err is not nil, res (or a Result of its own) with
// the decision, error and exit code err gives.
func failedResult(j *job.Job, res *Result, err error) *Result {
	if err == nil {
		return res
	}
	if res == nil {
		res = &Result{Job: j.Name, Changed: []string{}}
	}
	je := jobError(j.Name, err).(*JobError)
	res.Decision, res.Error, res.ExitCode, res.err = failedDecision(je.Code), err.Error(), je.Code, err
	return res
}

// inOrder returns done, which marks a job of jobs finished and calls f
// for every job not yet passed to it whose predecessors in jobs are all
// finished, in the order of jobs. done may be called from any goroutine;
// f is called under a lock.
func inOrder(jobs []*job.Job, f func(*job.Job)) (done func(*job.Job)) {
	var mu sync.Mutex
	finished := map[*job.Job]bool{}
	next := 0
	return func(j *job.Job) {
		mu.Lock()
		defer mu.Unlock()
		finished[j] = true
		for next < len(jobs) && finished[jobs[next]] {
			f(jobs[next])
			next++
		}
	}
}

// failedDecision is the decision of a job whose error has exit code code.
func failedDecision(code int) Decision {
	if code == ExitRefused {
		return DecisionRefused
	}
	return DecisionFailed
}

// partial is the error of a project call: nil, or a *PartialError of the
// failed jobs and of the databases that failed to close.
func partial(failed []*JobError, closeErr error) error {
	if closeErr != nil {
		failed = append(failed, &JobError{Code: ExitFailure, Err: closeErr})
	}
	if len(failed) == 0 {
		return nil
	}
	return &PartialError{Failed: failed}
}

// open opens job name's database, read-only when asked.
func (p *Project) open(ctx context.Context, name string, readOnly bool) (*job.Job, *run.DB, error) {
	j, err := p.job(name)
	if err != nil {
		return nil, nil, err
	}
	path, oo, err := p.database(j)
	if err != nil {
		return nil, nil, jobError(name, err)
	}
	oo.ReadOnly = readOnly
	db, err := run.Open(ctx, path, oo)
	if err != nil {
		return nil, nil, jobError(name, err)
	}
	return j, db, nil
}

// Rerun rebuilds snapshot (0: the latest) of job name in a scratch database
// from its retained inputs and the transform version, config and schema
// recorded for it, and compares the sha256 of the rebuilt target's
// canonical export with that of the snapshot as stored, as idem rerun does.
// It is RerunWith with only a Snapshot.
func (p *Project) Rerun(ctx context.Context, name string, snapshot int64) (*RerunResult, error) {
	return p.RerunWith(ctx, name, RerunOptions{Snapshot: snapshot})
}

// RerunWith is Rerun as opts say, as idem rerun's flags do. The job's
// database is only read. A snapshot that is not reproduced (with Deep, an
// upstream snapshot too) is returned beside a *JobError wrapping
// ErrNotReproduced, with the difference in Diff; released SQL edited
// since, a changed checkpoint file or an expired snapshot is ErrRefused.
func (p *Project) RerunWith(ctx context.Context, name string, opts RerunOptions) (*RerunResult, error) {
	j, db, err := p.open(ctx, name, true)
	if err != nil {
		return nil, err
	}
	defer db.Close() // read-only: nothing to lose
	_, oo, _ := p.database(j)
	ro := history.RerunOptions{Snapshot: opts.Snapshot, DuckDB: oo.DuckDB, Progress: p.s.progress, Fault: p.faultFor(db.Path()),
		Deep: opts.Deep, FromStart: opts.FromStart}
	if opts.Deep {
		ro.Upstream = upstreamFinder(j)
	}
	res, err := history.Rerun(ctx, db, j, ro)
	if err != nil {
		return nil, jobError(name, err)
	}
	var out RerunResult
	if err := convert(res, &out); err != nil {
		return nil, jobError(name, err)
	}
	if !res.Reproduced {
		return &out, jobError(name, fmt.Errorf("%w: snapshot %d: sha256 %s, rebuilt %s", ErrNotReproduced, res.Snapshot, res.SHA256, res.Rebuilt))
	}
	if !res.AllReproduced() {
		return &out, jobError(name, fmt.Errorf("%w: an upstream snapshot of snapshot %d", ErrNotReproduced, res.Snapshot))
	}
	return &out, nil
}

// upstreamFinder finds an upstream job of j by name among the job files
// beside j's (same database), read once, on the first upstream looked
// for.
func upstreamFinder(j *job.Job) func(string) (*job.Job, error) {
	dir := filepath.Dir(j.File)
	var beside []*job.Job
	loaded := false
	return func(name string) (*job.Job, error) {
		if !loaded {
			loaded = true
			// project.Files lists the regular *.toml files of the folder
			// (a FIFO or a pipeline.toml is left out).
			files, _ := project.Files([]string{dir})
			for _, f := range files {
				if uj, err := run.LoadJob(f, pipelines.FS); err == nil {
					beside = append(beside, uj)
				}
			}
		}
		for _, uj := range beside {
			if uj.Name == name && absPath(uj.Database) == absPath(j.Database) {
				return uj, nil
			}
		}
		return nil, &report.UsageError{Msg: fmt.Sprintf("no job file for %s in %s (with database %s)", name, dir, j.Database)}
	}
}

func absPath(p string) string {
	if a, err := filepath.Abs(p); err == nil {
		return a
	}
	return p
}

// Export writes a table of job name, pinned at a snapshot, in key order, as
// idem export does: two exports of one snapshot are byte-identical,
// whatever the thread count. The file is written beside Out and renamed
// into place. The database is only read (a given Snapshot from the read
// replica under WithReplicaReads). Errors: no Out or a bad format
// (ErrUsage), an expired snapshot (ErrRefused).
func (p *Project) Export(ctx context.Context, name string, opts ExportOptions) (*ExportResult, error) {
	return readPinned(ctx, p, name, []int64{opts.Snapshot}, func(j *job.Job, db *run.DB) (*ExportResult, error) {
		return exportOn(ctx, j, db, opts, p.s.progress, p.faultFor(db.Path()))
	})
}
