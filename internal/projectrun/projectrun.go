package projectrun

import (
	"context"
	"path/filepath"
	"strings"

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

// Run runs every job of p, each through fn, a job once every job of p it
// reads is done, at most concurrency jobs at a time (below 1: one): jobs of
// independent branches run at once, of one database file or of several
// (run.DB lets one writing transaction of a file in at a time, and decides
// the jobs with nothing to write beside it). Among the jobs ready, the
// first in p.Jobs order starts first; with concurrency 1 the jobs run in
// p.Jobs order. Two jobs of one database file naming the same target table
// run in p.Jobs order too, so which of them the owner guard refuses does
// not depend on timing. A job downstream of one that failed or was blocked
// is not run: blocked is called for it (if not nil) when its turn comes,
// and its Outcome names the jobs it waited for. Run returns when every job
// is done, with one Outcome per job in p.Jobs order. Canceling ctx is fn's
// to honour: the jobs still to run are run with the canceled ctx, which
// makes them fail without committing.
func Run(ctx context.Context, p *project.Project, concurrency int, fn JobFunc, blocked func(j *job.Job, by []string)) []*Outcome {
	out := make(map[*job.Job]*Outcome, len(p.Jobs))
	for _, j := range p.Jobs {
		out[j] = &Outcome{Job: j}
	}
	after := sameTarget(p.Jobs)
	failed := map[*job.Job]bool{}
	decided := map[string]string{} // job name → decision
	finished := map[*job.Job]bool{}
	started := map[*job.Job]bool{}
	ready := func(j *job.Job) bool {
		for _, u := range p.Upstream(j) {
			if !finished[u] {
				return false
			}
		}
		return after[j] == nil || finished[after[j]]
	}
	done := make(chan *job.Job)
	limit, running := max(concurrency, 1), 0
	for len(finished) < len(p.Jobs) {
		for _, j := range p.Jobs {
			if running >= limit {
				break
			}
			if started[j] || !ready(j) {
				continue
			}
			started[j] = true
			o := out[j]
			if o.BlockedBy = p.BlockedBy(j, failed); len(o.BlockedBy) > 0 {
				failed[j], finished[j] = true, true
				if blocked != nil {
					blocked(j, o.BlockedBy)
				}
				continue
			}
			upstream := map[string]string{}
			for _, u := range p.Upstream(j) {
				upstream[u.Name] = decided[u.Name]
			}
			running++
			go func() {
				o.Decision, o.Err = fn(ctx, j, upstream)
				done <- j
			}()
		}
		if running == 0 {
			continue // a blocked job finished: look again
		}
		j := <-done
		running--
		finished[j] = true
		decided[j.Name] = out[j].Decision
		if out[j].Err != nil {
			failed[j] = true
		}
	}
	outcomes := make([]*Outcome, len(p.Jobs))
	for i, j := range p.Jobs {
		outcomes[i] = out[j]
	}
	return outcomes
}

// sameTarget maps each job to the job before it in jobs of the same
// database file that names the same target table, if any.
func sameTarget(jobs []*job.Job) map[*job.Job]*job.Job {
	last := map[string]*job.Job{}
	out := map[*job.Job]*job.Job{}
	for _, j := range jobs {
		if j.Table == "" {
			continue
		}
		db := j.Database
		if abs, err := filepath.Abs(db); err == nil && db != "" {
			db = abs
		}
		k := db + "\x00" + strings.ToLower(j.Table)
		if prev, ok := last[k]; ok {
			out[j] = prev
		}
		last[k] = j
	}
	return out
}
