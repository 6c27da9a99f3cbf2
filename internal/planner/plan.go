package planner

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/idem-dev/idem/internal/catalog"
	"github.com/idem-dev/idem/internal/job"
	"github.com/idem-dev/idem/internal/jobkey"
	"github.com/idem-dev/idem/internal/pipeline"
	"github.com/idem-dev/idem/internal/report"
	"github.com/idem-dev/idem/internal/run"
	"github.com/idem-dev/idem/internal/source"
)

// Plan is what a run would decide, computed without writing anything. Its
// decision is in the words a run reports: loaded, applied, skipped,
// already_committed, or refused (with the guard's message as the reason).
type Plan struct {
	Job       string       `json:"job"`
	Mode      string       `json:"mode"`
	Decision  string       `json:"decision"`
	Changed   []string     `json:"changed"`
	FirstLoad bool         `json:"first_load"`
	JobKey    string       `json:"job_key"`
	BatchID   string       `json:"batch_id,omitempty"`
	Snapshot  int64        `json:"snapshot"`
	Cursor    int64        `json:"cursor"`
	Epoch     int64        `json:"epoch"`
	Reason    string       `json:"reason,omitempty"`
	NewFiles  []string     `json:"new_files,omitempty"` // files-mode jobs
	Parts     jobkey.Parts `json:"parts"`
	// Upstream lists the upstream jobs a run would pin (see run.Result).
	Upstream []run.UpstreamChange `json:"upstream,omitempty"`
	// ModelChange classifies a change of a model's SQL or columns against
	// its latest snapshot (plan_model.go).
	ModelChange *ModelChange `json:"model_change,omitempty"`

	// Refusal is the error the run would meet: a *RefusedError when the
	// decision is refused, else nil. Error and ExitCode carry it in JSON,
	// as a failed command's error object does.
	Refusal  error  `json:"-"`
	Error    string `json:"error,omitempty"`
	ExitCode int    `json:"exit_code,omitempty"`
}

// setState records the job's state row the plan was made against.
func (p *Plan) setState(st catalog.State) {
	p.Snapshot, p.Cursor, p.Epoch = st.Snapshot, st.Cursor, st.Epoch
}

// refuse records the refusal a run would meet.
func (p *Plan) refuse(err error, msg string) {
	p.Decision, p.Reason, p.Refusal = report.DecisionRefused, msg, err
	p.Error, p.ExitCode = err.Error(), report.ExitCode(err)
}

// PlanRun computes the decision a run of job would take against the
// database at dbPath: it runs the run's own guards (decide) in a
// transaction it rolls back, on the database opened read-only, or none at
// all when the database or idem's tables do not exist yet. Nothing is
// written. A refusal is reported in the plan (Decision refused, Refusal
// set), not as the error; the error is for a plan that cannot be made.
func PlanRun(ctx context.Context, dbPath string, j *job.Job, opts run.RunOptions, open run.OpenOptions) (*Plan, error) {
	db, err := openForPlan(ctx, dbPath, open)
	if err != nil {
		return nil, err
	}
	if db != nil {
		defer db.Close()
	}
	return PlanRunDB(ctx, db, j, opts)
}

// PlanRunDB is PlanRun on a database already open read-only (a project's
// plan opens each database once for all its jobs); db nil is a database
// that does not exist yet or holds no idem tables (HasCatalog).
func PlanRunDB(ctx context.Context, db *run.DB, j *job.Job, opts run.RunOptions) (*Plan, error) {

	// A files-mode run applies each new file as its batch: the plan is the
	// first batch's, and lists them all. A chunked run's batches are known
	// only once its input is staged: the plan checks the guards every chunk
	// meets.
	chunked := j.Input.ChunkRows > 0
	newFiles, early, err := planFiles(ctx, db, j, &opts)
	if err != nil || early != nil {
		return early, err
	}

	p, err := run.Prepare(ctx, j, opts)
	if err != nil {
		return nil, err
	}
	plan := &Plan{Job: j.Name, Mode: j.Pipeline.Mode, JobKey: p.Key(), BatchID: p.BatchID(), Changed: []string{}, Parts: p.Parts(), Epoch: 1, NewFiles: newFiles}
	if chunked {
		plan.BatchID = ""
	}
	wouldWrite := map[string]string{pipeline.ModeRefresh: report.DecisionLoaded, pipeline.ModeApply: report.DecisionApplied}[j.Pipeline.Mode]
	if db == nil {
		plan.FirstLoad, plan.Decision = true, wouldWrite
		if j.ReadsUpstream() {
			plan.JobKey = "" // known once the upstreams have committed
			plan.Reason = fmt.Sprintf("once upstream %s has committed (it has not yet)", j.SortedUpstream()[0])
		}
		return plan, nil
	}
	conn, err := db.SQL().Conn(ctx)
	if err != nil {
		return nil, fmt.Errorf("plan: connect %s: %w", db.Path(), err)
	}
	defer conn.Close()
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("plan: begin: %w", err)
	}
	defer tx.Rollback()
	st, err := catalog.ReadState(ctx, tx, j.Name)
	if err != nil {
		return nil, err
	}
	plan.setState(st)
	plan.FirstLoad = !st.HasParts
	if st.HasParts {
		plan.Changed = report.NonNil(p.Parts().Changed(st.Parts))
	}
	// Chunk batch ids are named from the staged rows: no ledger check.
	res, done, err := db.Decide(ctx, tx, j, p, opts, chunked)
	var refused *report.RefusedError
	var noUpstream *source.NoUpstreamError
	if res != nil {
		// Pinning upstreams completed the key inside the transaction.
		plan.JobKey, plan.Parts, plan.Upstream = p.Key(), p.Parts(), res.Upstream
		if j.ReadsUpstream() && j.Pipeline.Mode == pipeline.ModeApply {
			plan.BatchID = res.BatchID // named from the upstream range it pinned
		}
		if st.HasParts {
			plan.Changed = report.NonNil(p.Parts().Changed(st.Parts))
		}
	}
	switch {
	case errors.As(err, &noUpstream):
		plan.Decision, plan.FirstLoad = wouldWrite, !st.HasParts
		plan.Reason = fmt.Sprintf("once upstream %s has committed (it has not yet)", noUpstream.Upstream)
		plan.JobKey = ""
	case errors.As(err, &refused):
		plan.refuse(err, refused.Msg)
	case err != nil:
		return nil, err
	case done:
		plan.Decision = res.Decision
	default:
		plan.Decision = wouldWrite
		if chunked {
			plan.Reason = fmt.Sprintf("chunks of %d rows by %s after watermark %d; skipped when nothing lies past it", j.Input.ChunkRows, j.Input.Watermark, st.Cursor)
		}
		if j.IsModel() && st.HasParts && (slices.Contains(plan.Changed, jobkey.PartTransform) || slices.Contains(plan.Changed, jobkey.PartSchema)) {
			if plan.ModelChange, err = classifyModel(ctx, tx, j, st.Snapshot); err != nil {
				return nil, err
			}
			for _, c := range plan.ModelChange.ColumnsRetyped {
				if slices.Contains(j.Key, c.Name) {
					msg := catalog.KeyRetypeMessage(j.Name, c.Name, c.From, c.To)
					plan.refuse(report.Refuse("schema", "%s", msg), msg)
					break
				}
			}
		}
	}
	return plan, nil
}

// AfterUpstream is the plan of job j in a project whose jobs it reads were
// planned first (upstream: their decisions, by name). A plan that would be
// skipped is rebuilt when one of them would commit first: the upstream's
// new snapshot changes j's input, so its key is known only then.
func (p *Plan) AfterUpstream(j *job.Job, upstream map[string]string) {
	if p.Decision != report.DecisionSkipped {
		return
	}
	for _, u := range j.SortedUpstream() {
		if d := upstream[u]; d == report.DecisionLoaded || d == report.DecisionApplied {
			p.Decision = map[string]string{pipeline.ModeRefresh: report.DecisionLoaded, pipeline.ModeApply: report.DecisionApplied}[j.Pipeline.Mode]
			p.Changed = []string{jobkey.PartInput}
			p.Reason = fmt.Sprintf("upstream %s would commit first", u)
			p.JobKey = ""
			return
		}
	}
}

// openForPlan opens the database at dbPath read-only for a plan; nil when
// it does not exist yet or holds no idem tables.
func openForPlan(ctx context.Context, dbPath string, open run.OpenOptions) (*run.DB, error) {
	if _, err := os.Stat(dbPath); errors.Is(err, os.ErrNotExist) {
		return nil, nil
	} else if err != nil {
		return nil, fmt.Errorf("plan: %w", err)
	}
	open.ReadOnly = true
	db, err := run.Open(ctx, dbPath, open)
	if err != nil {
		return nil, err
	}
	ok, err := HasCatalog(ctx, db)
	if err != nil || !ok {
		db.Close()
		return nil, err
	}
	return db, nil
}

// HasCatalog reports whether db holds idem's tables (a plan of a database
// without them plans every job from scratch).
func HasCatalog(ctx context.Context, db *run.DB) (bool, error) {
	return catalog.TableExists(ctx, db.SQL(), "idem", "jobs")
}

// planFiles picks the first batch of a files-mode job into opts and lists
// the new files. A plan that is already decided (a committed file changed,
// nothing new) comes back as early.
func planFiles(ctx context.Context, db *run.DB, j *job.Job, opts *run.RunOptions) (newFiles []string, early *Plan, err error) {
	if j.Input.Mode != job.InputModeFiles {
		return nil, nil, nil
	}
	if opts.BatchID != "" || opts.From != nil {
		return nil, nil, report.Usage("a files-mode job names its batches after its files: --batch-id, --from and --to do not apply")
	}
	var q catalog.Querier
	if db != nil {
		q = db.SQL()
	}
	fresh, err := source.Pending(ctx, q, j, opts.Input, opts.Progress)
	var refused *report.RefusedError
	if errors.As(err, &refused) {
		plan, err := refusedPlan(ctx, db, j, err)
		return nil, plan, err
	}
	if err != nil {
		return nil, nil, err
	}
	if len(fresh) == 0 {
		plan, err := nothingNew(ctx, db, j)
		return nil, plan, err
	}
	newFiles = make([]string, len(fresh))
	for i, f := range fresh {
		newFiles[i] = f.Path
	}
	first := fresh[:1]
	if j.Input.Batch == job.BatchAll {
		first = fresh
	}
	opts.Source = &source.Files{Job: j, Listed: first}
	opts.BatchID = filepath.Base(first[0].Path)
	if len(first) > 1 {
		opts.BatchID += ".." + filepath.Base(first[len(first)-1].Path)
	}
	return newFiles, nil, nil
}

// nothingNew is the plan of a files-mode job with no new file: the run
// would be skipped and keep the job's key.
func nothingNew(ctx context.Context, db *run.DB, j *job.Job) (*Plan, error) {
	plan := &Plan{Job: j.Name, Mode: j.Pipeline.Mode, Decision: report.DecisionSkipped, Changed: []string{}, Epoch: 1,
		NewFiles: []string{}, Reason: "nothing new: no file that is not committed"}
	if db == nil {
		return plan, nil
	}
	st, err := catalog.ReadState(ctx, db.SQL(), j.Name)
	if err != nil {
		return nil, err
	}
	plan.JobKey, plan.Parts = st.Key, st.Parts
	plan.setState(st)
	return plan, nil
}

// refusedPlan is the plan of a run refused before it prepares its input
// (a committed file that changed).
func refusedPlan(ctx context.Context, db *run.DB, j *job.Job, refusal error) (*Plan, error) {
	var refused *report.RefusedError
	errors.As(refusal, &refused)
	plan := &Plan{Job: j.Name, Mode: j.Pipeline.Mode, Changed: []string{}, Epoch: 1}
	plan.refuse(refusal, refused.Msg)
	if db != nil {
		st, err := catalog.ReadState(ctx, db.SQL(), j.Name)
		if err != nil {
			return nil, err
		}
		plan.setState(st)
	}
	return plan, nil
}
