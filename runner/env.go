package runner

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"

	"github.com/idem-dev/idem/internal/env"
	"github.com/idem-dev/idem/internal/history"
	"github.com/idem-dev/idem/internal/job"
	"github.com/idem-dev/idem/internal/projectrun"
	"github.com/idem-dev/idem/internal/report"
	"github.com/idem-dev/idem/internal/run"
)

// CheckEnvName refuses (ErrUsage) an environment name that is not a
// plain file name: 1 to 64 letters, digits, _ and -.
func CheckEnvName(name string) error { return jobError("", env.CheckEnvName(name)) }

// EnvPath is the database file of environment name of the database file
// db: <db>.envs/NAME.duckdb.
func EnvPath(db, name string) string { return env.Path(db, name) }

// envGroup is the jobs of one production database of a project, in run
// order (each with Database set to it), and its environment.
type envGroup struct {
	db   string
	jobs []*job.Job
	env  *env.Environment
}

// envGroups groups the project's jobs by their production database.
func (p *Project) envGroups() ([]*envGroup, error) {
	var groups []*envGroup
	byDB := map[string]*envGroup{}
	for _, j := range p.p.Jobs {
		db, _, err := p.database(j)
		if err != nil {
			return nil, err
		}
		g := byDB[db]
		if g == nil {
			g = &envGroup{db: db}
			byDB[db] = g
			groups = append(groups, g)
		}
		jj := *j
		jj.Database = db
		g.jobs = append(g.jobs, &jj)
	}
	return groups, nil
}

// loadEnvs is environment name of each database of the project, as idem
// run --env recorded it.
func (p *Project) loadEnvs(name string) ([]*envGroup, error) {
	if err := env.CheckEnvName(name); err != nil {
		return nil, err
	}
	groups, err := p.envGroups()
	if err != nil {
		return nil, err
	}
	for _, g := range groups {
		if g.env, err = env.LoadEnvironment(g.db, name); err != nil {
			return nil, err
		}
	}
	return groups, nil
}

// Environments lists the environments of the project's databases, as idem
// env list does: what idem run --env built in each, with the bytes of its
// file and of production's.
func (p *Project) Environments() ([]*EnvironmentFile, error) {
	groups, err := p.envGroups()
	if err != nil {
		return nil, jobError("", err)
	}
	out := []*EnvironmentFile{}
	for _, g := range groups {
		envs, err := env.ListEnvironments(g.db)
		if err != nil {
			return nil, jobError("", err)
		}
		for _, e := range envs {
			var pub EnvironmentFile
			if err := convert(e, &pub.Environment); err != nil {
				return nil, jobError("", err)
			}
			pub.Bytes, pub.Production = env.EnvironmentBytes(g.db, e.Name), env.DatabaseBytes(g.db)
			out = append(out, &pub)
		}
	}
	return out, nil
}

// PlanEnvironment says, for each of the project's databases, what idem
// run --env name would do, as idem plan --env does: which jobs it builds
// (a job production never committed, one whose definition changed, and
// every job downstream of them) and which it reads from production,
// pinned. The databases are only read.
func (p *Project) PlanEnvironment(ctx context.Context, name string) ([]*Environment, error) {
	if err := env.CheckEnvName(name); err != nil {
		return nil, jobError("", err)
	}
	groups, err := p.envGroups()
	if err != nil {
		return nil, jobError("", err)
	}
	var out []*Environment
	for _, g := range groups {
		env, err := env.PlanEnvironment(ctx, name, g.jobs, func(j *job.Job) run.OpenOptions {
			_, oo, _ := p.database(j)
			return oo
		})
		if err != nil {
			return nil, jobError("", err)
		}
		var pub Environment
		if err := convert(env, &pub); err != nil {
			return nil, jobError("", err)
		}
		out = append(out, &pub)
	}
	return out, nil
}

// RunEnvironment builds environment name beside each of the project's
// databases, as idem run --env does: the jobs PlanEnvironment says it
// builds run as Run would run them, each in its own transaction, in
// <db>.envs/NAME.duckdb, reading the upstreams it does not build from
// production's committed snapshots, attached read-only; the others are not
// run. Production is only read, and no AfterCommit hook is called: nothing
// of production changed. each, when not nil, hears of every job in run
// order as Run's WithEachJob does, with its entry in the environment: a
// job read from production with a nil Result, a job built with its run's
// Result (blocked when a job it reads failed) and its *JobError. What was
// built is recorded beside each environment (for DiffEnvironment and
// Promote), failures too; RunEnvironment returns the environments so
// recorded and, when a job failed, a *PartialError naming the jobs.
func (p *Project) RunEnvironment(ctx context.Context, name string, each func(e *EnvJob, r *Result, err error)) ([]*EnvironmentFile, error) {
	if err := env.CheckEnvName(name); err != nil {
		return nil, jobError("", err)
	}
	groups, err := p.envGroups()
	if err != nil {
		return nil, jobError("", err)
	}
	groupOf := map[string]*envGroup{}
	for _, g := range groups {
		if g.env, err = env.PlanEnvironment(ctx, name, g.jobs, func(j *job.Job) run.OpenOptions {
			_, oo, _ := p.database(j)
			return oo
		}); err != nil {
			return nil, jobError("", err)
		}
		for _, j := range g.jobs {
			groupOf[j.Name] = g
		}
	}
	var mu sync.Mutex
	errs := map[string]error{}
	_, failed, closeErr := p.runAll(ctx, func(ctx context.Context, h *projectrun.Handles, j *job.Job) (*Result, error) {
		g := groupOf[j.Name]
		if e, _ := g.env.Find(j.Name); !e.Build {
			return nil, nil
		}
		_, oo, err := p.database(j)
		if err != nil {
			return nil, err
		}
		res, err := p.runOn(ctx, h, j, env.Path(g.db, name), env.OpenOptions(g.env, oo), env.RunOptions(g.env, j, run.RunOptions{}))
		mu.Lock()
		errs[j.Name] = err
		mu.Unlock()
		return res, err
	}, func(j *job.Job, r *Result, err error) {
		if each == nil {
			return
		}
		e, _ := groupOf[j.Name].env.Find(j.Name)
		var pub EnvJob
		if cerr := convert(e, &pub); cerr != nil {
			pub = EnvJob{Job: e.Job, Database: e.Database, Build: e.Build, Reason: e.Reason, Production: e.Production}
		}
		each(&pub, r, err)
	})
	out := []*EnvironmentFile{}
	for _, g := range groups {
		for _, e := range g.env.Built() {
			if _, ran := errs[e.Job]; !ran {
				errs[e.Job] = errors.New("not run: an upstream failed or was refused")
			}
		}
		_, oo, _ := p.database(g.jobs[0])
		oo.Attach = nil
		if err := env.RecordEnvBuilds(ctx, g.env, errs, oo); err != nil {
			return out, jobError("", err)
		}
		if err := env.SaveEnvironment(g.env); err != nil {
			return out, jobError("", err)
		}
		var pub EnvironmentFile
		if err := convert(g.env, &pub.Environment); err != nil {
			return out, jobError("", err)
		}
		pub.Bytes, pub.Production = env.EnvironmentBytes(g.db, name), env.DatabaseBytes(g.db)
		out = append(out, &pub)
	}
	return out, partial(failed, closeErr)
}

// DiffEnvironment compares every job environment name built (idem run
// --env) with production's latest snapshot of it, as idem diff --env
// does: each side's sha256 (that of its canonical export), the keys
// added, removed and changed, and the numeric columns' differences. The
// databases are only read. Errors: a bad name, no such environment, a
// built job the project no longer has (ErrUsage).
func (p *Project) DiffEnvironment(ctx context.Context, name string) ([]*EnvDiff, error) {
	groups, err := p.loadEnvs(name)
	if err != nil {
		return nil, jobError("", err)
	}
	diffs := []*EnvDiff{}
	for _, g := range groups {
		built := g.env.Built()
		if len(built) == 0 {
			continue
		}
		_, oo, _ := p.database(g.jobs[0])
		oo = env.OpenOptions(g.env, oo)
		oo.ReadOnly = true
		db, err := run.Open(ctx, env.Path(g.db, name), oo)
		if err != nil {
			return nil, jobError("", err)
		}
		for _, e := range built {
			j := jobNamed(g.jobs, e.Job)
			if j == nil {
				db.Close()
				return nil, jobError("", &report.UsageError{Msg: fmt.Sprintf("environment %s built job %s, which the project no longer has", name, e.Job)})
			}
			d, err := env.DiffEnvironment(ctx, db, g.env, e, j)
			if err != nil {
				db.Close()
				return nil, jobError("", err)
			}
			var pub EnvDiff
			if err := convert(d, &pub); err != nil {
				db.Close()
				return nil, jobError("", err)
			}
			diffs = append(diffs, &pub)
		}
		if err := db.Close(); err != nil {
			return nil, jobError("", err)
		}
	}
	return diffs, nil
}

// DropEnvironment removes environment name of each of the project's
// databases that has it, as idem env drop does, and returns those
// databases. Errors: a bad name, no database with the environment
// (ErrUsage).
func (p *Project) DropEnvironment(name string) ([]string, error) {
	if err := env.CheckEnvName(name); err != nil {
		return nil, jobError("", err)
	}
	groups, err := p.envGroups()
	if err != nil {
		return nil, jobError("", err)
	}
	var dropped []string
	for _, g := range groups {
		if _, err := os.Stat(env.Path(g.db, name)); err != nil {
			if _, err := env.LoadEnvironment(g.db, name); err != nil {
				continue
			}
		}
		if err := env.DropEnvironment(g.db, name); err != nil {
			return dropped, jobError("", err)
		}
		dropped = append(dropped, g.db)
	}
	if len(dropped) == 0 {
		return nil, jobError("", &report.UsageError{Msg: fmt.Sprintf("no environment %s here", name)})
	}
	return dropped, nil
}

// Promote commits every job environment name built (idem run --env) into
// production as its next snapshot, as idem promote does: in run order, in
// one transaction per database, pinned to the upstream snapshots the
// environment read. A model's rows are copied from the environment (with
// recompute its SELECT runs again in production); other jobs run again.
// Each commits only if its rows have the sha256 the environment showed.
// Errors (ErrRefused): production moved since the environment was built,
// a job's files no longer give the definition it was built from, rows
// that differ; then nothing of that database is committed. A result
// beside an error holds the databases promoted before it (nil: the
// environment could not be loaded, nothing was tried). The
// AfterCommit hooks follow each database's commit.
func (p *Project) Promote(ctx context.Context, name string, recompute bool) (*PromoteResult, error) {
	groups, err := p.loadEnvs(name)
	if err != nil {
		return nil, jobError("", err)
	}
	res := &PromoteResult{Promoted: []*Promoted{}}
	for _, g := range groups {
		if len(g.env.Built()) == 0 {
			continue
		}
		done, commits, err := p.promoteGroup(ctx, g, name, recompute)
		if err != nil {
			return res, jobError("", err)
		}
		for _, d := range done {
			var pub Promoted
			if err := convert(d, &pub); err != nil {
				return res, jobError("", err)
			}
			res.Promoted = append(res.Promoted, &pub)
		}
		for _, c := range commits {
			if err := p.afterCommit(ctx, c); err != nil {
				return res, err
			}
		}
	}
	return res, nil
}

// promoteGroup promotes what environment name built of the database of g:
// every job is checked first, then all of them run in one transaction, so
// that production holds all of them or none. commits are the jobs run,
// for the AfterCommit hooks.
func (p *Project) promoteGroup(ctx context.Context, g *envGroup, name string, recompute bool) (promoted []*env.Promoted, commits []Commit, err error) {
	built := g.env.Built()
	if _, err := os.Stat(env.Path(g.db, name)); err != nil {
		return nil, nil, &report.UsageError{Msg: fmt.Sprintf("environment %s has no database %s: build it with idem run --env %s", name, env.Path(g.db, name), name)}
	}
	_, oo, _ := p.database(g.jobs[0])
	oo = env.PromoteOpenOptions(g.env, oo)
	oo.Fault = p.faultFor(g.db)
	db, err := run.Open(ctx, g.db, oo)
	if err != nil {
		return nil, nil, err
	}
	var runs []run.JobRun
	var pending []*env.Promoted
	var envJobs []env.Job
	promoted = make([]*env.Promoted, len(built))
	for i, e := range built {
		j := jobNamed(g.jobs, e.Job)
		if j == nil {
			db.Close()
			return nil, nil, &report.UsageError{Msg: fmt.Sprintf("environment %s built job %s, which the project no longer has", name, e.Job)}
		}
		done, err := env.CheckPromote(ctx, db, g.env, e, j)
		if err != nil {
			db.Close()
			return nil, nil, err
		}
		if done == nil {
			done = &env.Promoted{}
			opts := env.PromoteRunOptions(g.env, e, j, recompute, run.RunOptions{Fault: jobFault(p.faultFor(g.db), j.Name), Expire: history.ExpireAfterRun}, done)
			runs = append(runs, run.JobRun{Job: j, Opts: opts})
			pending, envJobs = append(pending, done), append(envJobs, e)
		}
		promoted[i] = done
	}
	results, err := db.RunTogether(ctx, runs)
	if err != nil {
		return nil, nil, errors.Join(err, db.Close())
	}
	for i, res := range results {
		commits = append(commits, Commit{Job: res.Job, Verb: "promote", Snapshot: res.Snapshot, Committed: pending[i].Decision != ""})
		if pending[i].Decision == "" {
			// Nothing to commit: production's latest already has this
			// job key.
			*pending[i] = env.Promoted{Job: res.Job, Decision: env.DecisionAlreadyPromoted, Snapshot: res.Snapshot, EnvSnapshot: envJobs[i].Snapshot, JobKey: res.JobKey}
		}
	}
	if err := db.Close(); err != nil {
		return nil, nil, fmt.Errorf("close database %s: %w", g.db, err)
	}
	return promoted, commits, nil
}

// jobFault passes each fault point to hook twice: as POINT and as
// JOB:POINT, so that a fault can name the point of one job of a call
// that runs several (Promote).
func jobFault(hook func(string), name string) func(string) {
	if hook == nil {
		return nil
	}
	return func(p string) {
		hook(p)
		hook(name + ":" + p)
	}
}

func jobNamed(jobs []*job.Job, name string) *job.Job {
	for _, j := range jobs {
		if j.Name == name {
			return j
		}
	}
	return nil
}
