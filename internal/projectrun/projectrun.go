package projectrun

import (
	"context"
	"sync"

	"github.com/idem-dev/idem/internal/job"
	"github.com/idem-dev/idem/internal/project"
)

// JobFunc runs (or plans) one job of a project. upstream maps each job of
// the project that j reads to the decision its JobFunc returned ("" when
// it failed). The decision it returns is passed on to j's downstream jobs;
// an error marks j failed, and every job downstream of it is blocked.
type JobFunc func(ctx context.Context, j *job.Job, upstream map[string]string) (decision string, err error)

// Outcome is how one job of a project run ended.
type Outcome struct {
	Job *job.Job
	// Decision and Err are what the job's JobFunc returned; both are zero
	// for a blocked job.
	Decision string
	Err      error
	// BlockedBy names the jobs of the project that j reads, directly or
	// not, that failed or were blocked; the job was not run. Empty for a
	// job that ran.
	BlockedBy []string
}

// Run runs every job of p in order, each through fn. A job downstream of
// one that failed or was blocked is not run: blocked is called for it (if
// not nil) when its turn comes, and its Outcome names the jobs it waited
// for. The jobs of one database file run one after another; the groups of
// different files (project.Groups) run at once, at most concurrency at a
// time (below 1: one). Run returns when every job is done, with one
// Outcome per job in p.Jobs order. Canceling ctx is fn's to honour: the
// jobs still to run are run with the canceled ctx, which makes them fail
// without committing.
func Run(ctx context.Context, p *project.Project, concurrency int, fn JobFunc, blocked func(j *job.Job, by []string)) []*Outcome {
	out := make(map[*job.Job]*Outcome, len(p.Jobs))
	for _, j := range p.Jobs {
		out[j] = &Outcome{Job: j}
	}
	var mu sync.Mutex
	failed := map[*job.Job]bool{}
	decided := map[string]string{} // job name → decision
	runGroup := func(group []*job.Job) {
		for _, j := range group {
			o := out[j]
			mu.Lock()
			o.BlockedBy = p.BlockedBy(j, failed)
			if len(o.BlockedBy) > 0 {
				failed[j] = true
			}
			upstream := map[string]string{}
			for _, u := range p.Upstream(j) {
				upstream[u.Name] = decided[u.Name]
			}
			mu.Unlock()
			if len(o.BlockedBy) > 0 {
				if blocked != nil {
					blocked(j, o.BlockedBy)
				}
				continue
			}
			o.Decision, o.Err = fn(ctx, j, upstream)
			mu.Lock()
			decided[j.Name] = o.Decision
			if o.Err != nil {
				failed[j] = true
			}
			mu.Unlock()
		}
	}
	sem := make(chan struct{}, max(concurrency, 1))
	var wg sync.WaitGroup
	for _, g := range p.Groups() {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			runGroup(g)
		}()
	}
	wg.Wait()
	outcomes := make([]*Outcome, len(p.Jobs))
	for i, j := range p.Jobs {
		outcomes[i] = out[j]
	}
	return outcomes
}
