package runner

// The plan verbs: what a run would decide, computed by the run's own
// guards in a transaction rolled back.

import (
	"context"
	"errors"
	"os"
	"sync"

	"github.com/idem-dev/idem/internal/job"
	"github.com/idem-dev/idem/internal/planner"
	"github.com/idem-dev/idem/internal/projectrun"
	"github.com/idem-dev/idem/internal/run"
)

// PlanJob computes what RunJob(ctx, name, b) would decide, writing nothing:
// it runs the run's own guards in a transaction it rolls back, on the
// database opened read-only (none when it does not exist yet). A plan the
// run would be refused is returned with Decision refused, beside a
// *JobError wrapping ErrRefused.
func (p *Project) PlanJob(ctx context.Context, name string, b Batch) (*Plan, error) {
	j, err := p.job(name)
	if err != nil {
		return nil, err
	}
	opts, err := b.options()
	if err != nil {
		return nil, jobError(name, err)
	}
	plan, err := p.planJob(ctx, nil, j, opts, nil, nil)
	return plan, jobError(name, err)
}

// planJob plans j on a database from h (nil: opened and closed here).
// upstream holds the decisions planned for the jobs of the project j
// reads: a job whose upstream would write is rebuilt after it. downstream
// names the project's jobs that read j, which a model's change rebuilds.
func (p *Project) planJob(ctx context.Context, h *projectrun.Handles, j *job.Job, opts run.RunOptions, upstream map[string]string, downstream []string) (*Plan, error) {
	path, oo, err := p.database(j)
	if err != nil {
		return nil, err
	}
	plan, err := p.planOn(ctx, h, path, j, opts, oo)
	if err != nil {
		return nil, err
	}
	plan.AfterUpstream(j, upstream)
	if plan.ModelChange != nil && downstream != nil {
		plan.ModelChange.Downstream = downstream
	}
	out, err := planOf(plan)
	if err != nil {
		return nil, err
	}
	return out, plan.Refusal
}

// planOn plans j on the database at path, opened read-only from h; a
// database that does not exist yet, or holds no idem tables, plans the
// job from scratch.
func (p *Project) planOn(ctx context.Context, h *projectrun.Handles, path string, j *job.Job, opts run.RunOptions, oo run.OpenOptions) (plan *planner.Plan, err error) {
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return planner.PlanRunDB(ctx, nil, j, opts)
	}
	oo.ReadOnly, oo.Fault = true, p.faultFor(path)
	db, done, err := h.Open(ctx, path, oo)
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, done(err)) }()
	ok, err := planner.HasCatalog(ctx, db)
	if err != nil {
		return nil, err
	}
	if !ok {
		db = nil
	}
	return planner.PlanRunDB(ctx, db, j, opts)
}

// Plan plans every job of the project in run order, as Run would run them,
// writing nothing: a job whose upstream in the project would commit first
// is planned as rebuilt. Jobs are planned at once up to WithConcurrency,
// each database opened once, read-only; WithEachPlan hears of each plan in
// run order. It returns one Plan per job and, when a run would be refused
// or a plan cannot be made, a *PartialError naming those jobs (their
// downstream jobs are blocked).
func (p *Project) Plan(ctx context.Context) ([]*Plan, error) {
	h := projectrun.NewHandles()
	plans := make(map[*job.Job]*Plan, len(p.p.Jobs))
	errs := make(map[*job.Job]error, len(p.p.Jobs))
	var mu sync.Mutex
	made := map[*job.Job]bool{}
	done := inOrder(p.p.Jobs, func(j *job.Job) {
		if p.s.eachPlan != nil {
			mu.Lock()
			pl, err := plans[j], errs[j]
			if !made[j] {
				pl = nil
			}
			mu.Unlock()
			p.s.eachPlan(pl, err)
		}
	})
	opts, _ := Batch{}.options()
	outcomes := projectrun.Run(ctx, p.p, p.s.concurrency, func(ctx context.Context, j *job.Job, upstream map[string]string) (string, error) {
		plan, err := p.planJob(ctx, h, j, opts, upstream, p.p.Downstream(j))
		mu.Lock()
		made[j] = plan != nil
		mu.Unlock()
		var je error
		if err != nil {
			je = jobError(j.Name, err)
			if plan == nil {
				code := je.(*JobError).Code
				plan = &Plan{Job: j.Name, Mode: j.Pipeline.Mode, Changed: []string{}, Decision: failedDecision(code), Error: err.Error(), ExitCode: code}
			}
		}
		mu.Lock()
		plans[j], errs[j] = plan, je
		mu.Unlock()
		done(j)
		return string(plan.Decision), err
	}, func(j *job.Job, by []string) {
		mu.Lock()
		plans[j], made[j] = &Plan{Job: j.Name, Mode: j.Pipeline.Mode, Changed: []string{}, Decision: DecisionBlocked, BlockedBy: by}, true
		mu.Unlock()
		done(j)
	})
	closeErr := h.Close()
	out := make([]*Plan, len(outcomes))
	var failed []*JobError
	for i, oc := range outcomes {
		out[i] = plans[oc.Job]
		if oc.Err != nil {
			failed = append(failed, jobError(oc.Job.Name, oc.Err).(*JobError))
		}
	}
	return out, partial(failed, closeErr)
}
