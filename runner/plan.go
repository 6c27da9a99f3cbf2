package runner

import (
	"context"
	"errors"
	"fmt"
	"os"
)

// Plan is what a run would decide, computed without writing anything.
type Plan struct {
	Job       string   `json:"job"`
	Mode      string   `json:"mode"`
	Decision  string   `json:"decision"` // load, apply, skip, already_committed, refuse
	Changed   []string `json:"changed"`
	FirstLoad bool     `json:"first_load"`
	JobKey    string   `json:"job_key"`
	BatchID   string   `json:"batch_id,omitempty"`
	Snapshot  int64    `json:"snapshot"`
	Cursor    int64    `json:"cursor"`
	Epoch     int64    `json:"epoch"`
	Reason    string   `json:"reason,omitempty"`
	NewFiles  []string `json:"new_files,omitempty"` // files-mode jobs
	Parts     Parts    `json:"parts"`
}

// PlanRun computes the decision a run of job would take against the
// database at dbPath, opening it read-only (or not at all when it does not
// exist yet). Nothing is written.
func PlanRun(ctx context.Context, dbPath string, job *Job, opts RunOptions, open OpenOptions) (*Plan, error) {
	p, err := prepare(ctx, job, opts)
	if err != nil {
		return nil, err
	}
	plan := &Plan{Job: job.Name, Mode: job.Pipeline.Mode, JobKey: p.key, BatchID: p.batchID, Changed: []string{}, Parts: p.parts, Epoch: 1}
	firstLoad := func() (*Plan, error) {
		plan.FirstLoad = true
		plan.Decision = map[string]string{ModeRefresh: "load", ModeApply: "apply"}[job.Pipeline.Mode]
		return plan, planInputMode(ctx, nil, job, opts, plan) // files.go
	}
	if _, err := os.Stat(dbPath); errors.Is(err, os.ErrNotExist) {
		return firstLoad()
	}
	open.ReadOnly = true
	db, err := Open(ctx, dbPath, open)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	ok, err := tableExists(ctx, db.sql, "idem", "jobs")
	if err != nil || !ok {
		if err != nil {
			return nil, err
		}
		return firstLoad()
	}
	st, err := readState(ctx, db.sql, job.Name)
	if err != nil {
		return nil, err
	}
	reason, err := planGuards(ctx, db.sql, job, st) // owners.go
	if err != nil {
		return nil, err
	}
	if !st.hasParts {
		plan.Epoch = st.epoch
		if reason != "" {
			plan.FirstLoad, plan.Decision, plan.Reason = true, "refuse", reason
			return plan, nil
		}
		return firstLoad()
	}
	plan.Snapshot, plan.Cursor, plan.Epoch = st.snapshot, st.cursor, st.epoch
	plan.Changed = nonNil(p.parts.Changed(st.parts))
	exists, err := tableExists(ctx, db.sql, "main", job.Table)
	if err != nil {
		return nil, err
	}
	switch job.Pipeline.Mode {
	case ModeRefresh:
		if st.key == p.key && exists {
			plan.Decision = "skip"
		} else {
			plan.Decision = "load"
		}
	case ModeApply:
		var digest string
		err := db.sql.QueryRowContext(ctx, `SELECT digest FROM idem.ledger WHERE job = ? AND batch_id = ?`, job.Name, p.batchID).Scan(&digest)
		switch {
		case err == nil && digest == p.digest:
			plan.Decision = DecisionAlreadyCommitted
		case err == nil:
			plan.Decision, plan.Reason = "refuse", fmt.Sprintf("batch %s was committed with another digest", p.batchID)
		case opts.From != nil && *opts.From != st.cursor:
			plan.Decision, plan.Reason = "refuse", fmt.Sprintf("batch starts at %d but the cursor is %d", *opts.From, st.cursor)
		default:
			plan.Decision = "apply"
		}
	}
	if err := planInputMode(ctx, db, job, opts, plan); err != nil { // files.go
		return nil, err
	}
	if reason != "" {
		plan.Decision, plan.Reason = "refuse", reason
	}
	if opts.Epoch != nil && *opts.Epoch != st.epoch {
		plan.Decision, plan.Reason = "refuse", fmt.Sprintf("epoch %d is not the current epoch %d", *opts.Epoch, st.epoch)
	}
	if opts.ExpectParent != nil && *opts.ExpectParent != st.snapshot && (plan.Decision == "load" || plan.Decision == "apply") {
		plan.Decision, plan.Reason = "refuse", fmt.Sprintf("stale parent: expected %d, latest is %d", *opts.ExpectParent, st.snapshot)
	}
	return plan, nil
}
