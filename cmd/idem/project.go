package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"

	"github.com/spf13/cobra"

	"github.com/idem-dev/idem/internal/job"
	"github.com/idem-dev/idem/internal/project"
	"github.com/idem-dev/idem/internal/run"
)

// projectFlags are the flags of run and plan over a project.
type projectFlags struct {
	selects []string
	jobs    int
}

func (p *projectFlags) register(cmd *cobra.Command, concurrency bool) {
	cmd.Flags().StringArrayVar(&p.selects, "select", nil, "run only job `NAME`; NAME+ with everything downstream, +NAME with everything upstream; repeatable")
	if concurrency {
		cmd.Flags().IntVar(&p.jobs, "jobs", 1, "run jobs of different database files at once, at most `N` at a time")
	}
}

// isProject says whether a run or plan is over a project: several paths,
// a folder, or a --select. One job file runs as it always has.
func (p *projectFlags) isProject(args []string) bool {
	if len(args) != 1 || len(p.selects) > 0 {
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
	for _, name := range oneJobFlags {
		if fl := cmd.Flags().Lookup(name); fl != nil && fl.Changed {
			return nil, &job.UsageError{Msg: fmt.Sprintf("--%s names one batch of one job: give one job file, not a project", name)}
		}
	}
	files, err := project.Files(args)
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
	return p.Select(pf.selects)
}

// jobOutcome is what one job of a project printed and how it ended.
type jobOutcome struct {
	stdout, stderr bytes.Buffer
	code           int
	blockedBy      []string
}

// runProject runs every job of p in order, each as `idem run JOB` (or
// plan) would, in its own transaction. A job downstream of one that failed
// or was refused is blocked and not run. Jobs of one database run one after
// another; groups of different databases run at once, up to jobs at a
// time. Output is printed in run order: with --json one array, an object
// per job. The exit code is the worst met.
func (a *app) runProject(p *project.Project, jobs int, jsonOut bool, one func(sub *app, j *job.Job, decided map[string]string) (string, error)) error {
	out := make(map[*job.Job]*jobOutcome, len(p.Jobs))
	for _, j := range p.Jobs {
		out[j] = &jobOutcome{}
	}
	var mu sync.Mutex
	handles := &dbHandles{open: map[string]*openDB{}}
	defer handles.closeAll()
	failed := map[*job.Job]bool{}
	decided := map[string]string{}  // job name → decision (plan)
	direct := jobs == 1 && !jsonOut // print as each job runs
	runGroup := func(group []*job.Job) {
		for _, j := range group {
			o := out[j]
			mu.Lock()
			o.blockedBy = p.BlockedBy(j, failed)
			mu.Unlock()
			if len(o.blockedBy) > 0 {
				mu.Lock()
				failed[j] = true
				mu.Unlock()
				if direct {
					a.printBlocked(j, o.blockedBy)
				}
				continue
			}
			sub := &app{stdout: &o.stdout, stderr: &o.stderr, getenv: a.getenv, handles: handles}
			if direct {
				sub.stdout, sub.stderr = a.stdout, a.stderr
			}
			mu.Lock()
			seen := map[string]string{}
			for _, u := range p.Upstream(j) {
				seen[u.Name] = decided[u.Name]
			}
			mu.Unlock()
			decision, err := one(sub, j, seen)
			mu.Lock()
			decided[j.Name] = decision
			mu.Unlock()
			if err != nil {
				o.code = 1
				if ce, ok := err.(*codeError); ok {
					o.code = ce.code
				}
				mu.Lock()
				failed[j] = true
				mu.Unlock()
			}
		}
	}
	groups := p.Groups()
	sem := make(chan struct{}, jobs)
	var wg sync.WaitGroup
	for _, g := range groups {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			runGroup(g)
		}()
	}
	wg.Wait()

	worst := 0
	var objs []json.RawMessage
	for _, j := range p.Jobs {
		o := out[j]
		worst = max(worst, o.code)
		if jsonOut {
			objs = append(objs, projectObject(j, o))
			io.Copy(a.stderr, &o.stderr)
			continue
		}
		if !direct {
			if len(o.blockedBy) > 0 {
				a.printBlocked(j, o.blockedBy)
			}
			io.Copy(a.stdout, &o.stdout)
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
	if worst != 0 {
		return &codeError{code: worst}
	}
	return nil
}

func (a *app) printBlocked(j *job.Job, by []string) {
	fmt.Fprintf(a.stdout, "%s: blocked by %s (not run)\n", j.Name, strings.Join(by, ", "))
}

// projectObject is one job's object in a project's --json array: the
// single run's object, an error object with the job and its decision
// (failed or refused), or a blocked job.
func projectObject(j *job.Job, o *jobOutcome) json.RawMessage {
	if len(o.blockedBy) > 0 {
		b, _ := json.Marshal(map[string]any{"job": j.Name, "decision": "blocked", "blocked_by": o.blockedBy})
		return b
	}
	raw := bytes.TrimSpace(o.stdout.Bytes())
	if o.code == 0 && json.Valid(raw) {
		return raw
	}
	m := map[string]any{}
	_ = json.Unmarshal(raw, &m)
	m["job"] = j.Name
	if _, ok := m["decision"]; !ok || m["decision"] == "" {
		m["decision"] = "failed"
		if o.code == job.ExitRefused {
			m["decision"] = "refused"
		}
	}
	if _, ok := m["exit_code"]; !ok {
		m["exit_code"] = o.code
	}
	b, _ := json.Marshal(m)
	return b
}

// dbHandles keeps, in a project run, one open handle per database file, so
// that the jobs of one database (which run one after another) share one
// open: opening checks the file, its WAL and idem's tables each time, and
// that is most of an unchanged job's cost.
type dbHandles struct {
	mu   sync.Mutex
	open map[string]*openDB
}

type openDB struct {
	db   *run.DB
	opts run.OpenOptions
}

func (h *dbHandles) closeAll() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for p, o := range h.open {
		o.db.Close()
		delete(h.open, p)
	}
}

// openDB opens the database at path, or in a project run reuses the handle
// an earlier job of the same database opened with the same settings. done
// is called with the job's error: a handle a job failed on is closed, so
// the next job opens the file afresh.
func (a *app) openDB(ctx context.Context, path string, opts run.OpenOptions) (*run.DB, func(error), error) {
	if a.handles == nil {
		db, err := run.Open(ctx, path, opts)
		if err != nil {
			return nil, nil, err
		}
		return db, func(error) { db.Close() }, nil
	}
	h := a.handles
	key := absPath(path)
	h.mu.Lock()
	defer h.mu.Unlock()
	if o, ok := h.open[key]; ok {
		if o.opts == opts {
			return o.db, h.release(key), nil
		}
		o.db.Close() // other settings: DuckDB opens a file once per process
		delete(h.open, key)
	}
	db, err := run.Open(ctx, path, opts)
	if err != nil {
		return nil, nil, err
	}
	h.open[key] = &openDB{db: db, opts: opts}
	return db, h.release(key), nil
}

func (h *dbHandles) release(key string) func(error) {
	return func(err error) {
		if err == nil {
			return
		}
		h.mu.Lock()
		defer h.mu.Unlock()
		if o, ok := h.open[key]; ok {
			o.db.Close()
			delete(h.open, key)
		}
	}
}
