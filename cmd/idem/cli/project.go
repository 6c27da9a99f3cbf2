package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"

	"github.com/spf13/cobra"

	"github.com/idem-dev/idem/internal/job"
	"github.com/idem-dev/idem/internal/ops"
	"github.com/idem-dev/idem/internal/project"
	"github.com/idem-dev/idem/internal/projectrun"
	"github.com/idem-dev/idem/internal/run"
	"github.com/idem-dev/idem/runner"
)

// projectFlags are the flags of run and plan over a project.
type projectFlags struct {
	selects  []string
	excludes []string
	jobs     int
	verbose  bool
}

func (p *projectFlags) register(cmd *cobra.Command, concurrency bool) {
	cmd.Flags().StringArrayVar(&p.selects, "select", nil, "run only the jobs `SEL` picks: NAME, tag:TAG, path:PATH or state:modified; SEL+ / SEL+N with everything / N generations downstream, +SEL / N+SEL upstream, @SEL, A,B to intersect, space-separated to add up; repeatable (forms above)")
	cmd.Flags().StringArrayVar(&p.excludes, "exclude", nil, "leave out the jobs `SEL` picks (the forms of --select), after every --select; repeatable")
	if concurrency {
		cmd.Flags().IntVar(&p.jobs, "jobs", runtime.NumCPU(), "run jobs whose upstreams are done at once, at most `N` at a time (default: the cores); output is printed in run order")
	}
	cmd.Flags().BoolVarP(&p.verbose, "verbose", "v", false, "name on stderr the *.toml files of a folder that are not job files, which are not read")
}

// isProject says whether a run or plan is over a project: several paths,
// a folder, or a --select. One job file runs as it always has.
func (p *projectFlags) isProject(args []string) bool {
	if len(args) != 1 || len(p.selects) > 0 || len(p.excludes) > 0 {
		return true
	}
	st, err := os.Stat(args[0])
	return err == nil && st.IsDir()
}

// oneJobFlags are the flags of run and plan that name one batch of one
// job; a project refuses them.
var oneJobFlags = []string{"input", "batch-id", "from", "to", "epoch", "expect-parent"}

// loadProject reads the job files args name and orders them.
func (a *app) loadProject(cmd *cobra.Command, args []string, pf projectFlags) (*project.Project, error) {
	if err := oneJobFlag(cmd); err != nil {
		return nil, err
	}
	files, skipped, err := project.FilesSkipping(args)
	if pf.verbose {
		for _, f := range skipped {
			a.notJobFile(f)
		}
	}
	if err != nil {
		return nil, err
	}
	var jobs []*job.Job
	for _, f := range files {
		j, err := loadJob(f)
		if err != nil {
			return nil, err
		}
		jobs = append(jobs, j)
	}
	p, err := project.New(jobs)
	if err != nil {
		return nil, err
	}
	q, err := p.Choose(project.Selection{Select: pf.selects, Exclude: pf.excludes}, func() (map[*job.Job]bool, error) {
		return modifiedJobs(cmd.Context(), p)
	})
	if err == nil && len(q.Jobs) == 0 {
		pf.pickedNone(a)
	}
	return q, err
}

// oneJobFlag refuses, over a project, a flag that names one batch of one
// job.
func oneJobFlag(cmd *cobra.Command) error {
	for _, name := range oneJobFlags {
		if fl := cmd.Flags().Lookup(name); fl != nil && fl.Changed {
			return &job.UsageError{Msg: fmt.Sprintf("--%s names one batch of one job: give one job file, not a project", name)}
		}
	}
	return nil
}

// notJobFile says, under --verbose, that a *.toml file of a folder is not
// read.
func (a *app) notJobFile(file string) {
	fmt.Fprintf(a.stderr, "idem: %s is not a job file (no top-level pipeline =): not read\n", file)
}

// pickedNone says that --select and --exclude left no job.
func (p *projectFlags) pickedNone(a *app) {
	var sel []string
	if len(p.selects) > 0 {
		sel = append(sel, "--select "+strings.Join(p.selects, " "))
	}
	if len(p.excludes) > 0 {
		sel = append(sel, "--exclude "+strings.Join(p.excludes, " "))
	}
	fmt.Fprintf(a.stderr, "idem: %s picks no job: nothing to do\n", strings.Join(sel, " "))
}

// options are the runner options of the project flags.
func (p *projectFlags) options(a *app) []runner.Option {
	var opts []runner.Option
	if len(p.selects) > 0 {
		opts = append(opts, runner.WithSelect(p.selects...))
	}
	if len(p.excludes) > 0 {
		opts = append(opts, runner.WithExclude(p.excludes...))
	}
	if p.jobs > 0 {
		opts = append(opts, runner.WithConcurrency(p.jobs))
	}
	if p.verbose {
		opts = append(opts, runner.WithSkippedFiles(a.notJobFile))
	}
	return opts
}

// modifiedJobs are the jobs --select state:modified picks: those a plan
// says would be rebuilt because their definition changed (their key's
// transform, schema or config part), or that never committed, whatever
// their inputs do. Each is planned against its own database, read-only.
func modifiedJobs(ctx context.Context, p *project.Project) (map[*job.Job]bool, error) {
	out := map[*job.Job]bool{}
	for _, j := range p.Jobs {
		var f dbFlags
		plan, err := ops.PlanRun(ctx, j.Database, j, run.RunOptions{}, f.openOptions(j))
		if err != nil {
			return nil, fmt.Errorf("--select state:modified: plan %s: %w", j.Name, err)
		}
		out[j] = plan.FirstLoad || slices.ContainsFunc(plan.Changed, func(part string) bool {
			return part == job.PartTransform || part == job.PartSchema || part == job.PartConfig
		})
	}
	return out, nil
}

// jobOutput is what one job of a project printed.
type jobOutput struct {
	stdout, stderr bytes.Buffer
}

// runProject runs every job of p through projectrun.Run, each as `idem run
// JOB` (or plan) would, in its own transaction, each job's databases kept
// open across the jobs that use them (a.handles), at most jobs at a time.
// With jobs 1 and no --json each job prints as it runs; otherwise each
// job's output is kept and printed in run order (p.Jobs) as soon as it and
// every job before it are done, so the output is the same whatever the
// jobs: with --json one array, an object per job, once all are done. The
// exit code is the worst met; a database that fails to close at the end is
// an error too.
func (a *app) runProject(ctx context.Context, p *project.Project, jobs int, jsonOut bool, one func(sub *app, j *job.Job, decided map[string]string) (string, error)) error {
	out := make(map[*job.Job]*jobOutput, len(p.Jobs))
	for _, j := range p.Jobs {
		out[j] = &jobOutput{}
	}
	handles := projectrun.NewHandles()
	direct := jobs == 1 && !jsonOut // print as each job runs
	var blockedBy sync.Map          // *job.Job → []string
	printed := inOrder(p.Jobs, func(j *job.Job) {
		if direct || jsonOut {
			return
		}
		if by, ok := blockedBy.Load(j); ok {
			a.printBlocked(j, by.([]string))
		}
		o := out[j]
		io.Copy(a.stdout, &o.stdout)
		io.Copy(a.stderr, &o.stderr)
	})
	outcomes := projectrun.Run(ctx, p, jobs, func(_ context.Context, j *job.Job, upstream map[string]string) (string, error) {
		o := out[j]
		sub := &app{stdout: &o.stdout, stderr: &o.stderr, faultErr: a.faultOut(), getenv: a.getenv, handles: handles, ext: a.ext}
		if direct {
			sub.stdout, sub.stderr = a.stdout, a.stderr
		}
		defer printed(j)
		return one(sub, j, upstream)
	}, func(j *job.Job, by []string) {
		if direct {
			a.printBlocked(j, by)
		}
		blockedBy.Store(j, by)
		printed(j)
	})
	closeErr := handles.Close()

	worst := 0
	var objs []json.RawMessage
	for _, oc := range outcomes {
		j, o := oc.Job, out[oc.Job]
		code := 0
		if oc.Err != nil {
			code = job.ExitFailure
			var ce *codeError
			if errors.As(oc.Err, &ce) {
				code = ce.code
			}
		}
		worst = max(worst, code)
		if jsonOut {
			objs = append(objs, projectObject(j, oc.BlockedBy, o, code))
			io.Copy(a.stderr, &o.stderr)
		}
	}
	if jsonOut {
		if objs == nil {
			objs = []json.RawMessage{}
		}
		if err := a.printJSON(objs); err != nil {
			return err
		}
	}
	if closeErr != nil {
		fmt.Fprintf(a.stderr, "idem: %v\n", closeErr)
		worst = max(worst, job.ExitFailure)
	}
	if worst != 0 {
		return &codeError{code: worst}
	}
	return nil
}

// inOrder returns done, which marks a job of jobs finished and calls print
// for every job not printed yet whose predecessors in jobs are all
// finished, in the order of jobs. done may be called from any goroutine;
// print is called under a lock.
func inOrder(jobs []*job.Job, print func(*job.Job)) (done func(*job.Job)) {
	var mu sync.Mutex
	finished := map[*job.Job]bool{}
	next := 0
	return func(j *job.Job) {
		mu.Lock()
		defer mu.Unlock()
		finished[j] = true
		for next < len(jobs) && finished[jobs[next]] {
			print(jobs[next])
			next++
		}
	}
}

func (a *app) printBlocked(j *job.Job, by []string) {
	fmt.Fprintf(a.stdout, "%s: blocked by %s (not run)\n", j.Name, strings.Join(by, ", "))
}

// projectObject is one job's object in a project's --json array: the
// single run's object, an error object with the job and its decision
// (failed or refused), or a blocked job.
func projectObject(j *job.Job, blockedBy []string, o *jobOutput, code int) json.RawMessage {
	if len(blockedBy) > 0 {
		b, _ := json.Marshal(map[string]any{"job": j.Name, "decision": "blocked", "blocked_by": blockedBy})
		return b
	}
	raw := bytes.TrimSpace(o.stdout.Bytes())
	if code == 0 && json.Valid(raw) {
		return raw
	}
	m := map[string]any{}
	_ = json.Unmarshal(raw, &m)
	m["job"] = j.Name
	if _, ok := m["decision"]; !ok || m["decision"] == "" {
		m["decision"] = "failed"
		if code == job.ExitRefused {
			m["decision"] = "refused"
		}
	}
	if _, ok := m["exit_code"]; !ok {
		m["exit_code"] = code
	}
	b, _ := json.Marshal(m)
	return b
}

// openDB opens the database at path, or in a project run reuses the handle
// an earlier job of the same database opened with the same settings
// (projectrun.Handles). done is called with the job's error; it returns the
// error of closing the database, when it closed it.
func (a *app) openDB(ctx context.Context, path string, opts run.OpenOptions) (*run.DB, func(error) error, error) {
	// A writable open of an older database migrates it (IDEM_FAULT
	// migrate_before_commit, migrate_after_commit).
	opts.Fault = a.faultHook(path)
	return a.handles.Open(ctx, path, opts)
}
