package env

import (
	"context"
	"database/sql"
	"fmt"
	"slices"

	"github.com/idem-dev/idem/internal/catalog"
	"github.com/idem-dev/idem/internal/diff"
	"github.com/idem-dev/idem/internal/export"
	"github.com/idem-dev/idem/internal/job"
	"github.com/idem-dev/idem/internal/report"
	"github.com/idem-dev/idem/internal/run"
	"github.com/idem-dev/idem/internal/sqltext"
)

// Promoted is what idem promote did with one job an environment built.
type Promoted struct {
	Job string `json:"job"`
	// Decision is promoted, or already_promoted when production's latest
	// snapshot is the one an earlier promote of this environment
	// committed (a promote cut short and run again).
	Decision string `json:"decision"`
	// Snapshot is production's snapshot holding the environment's rows,
	// EnvSnapshot the environment's.
	Snapshot    int64  `json:"snapshot"`
	EnvSnapshot int64  `json:"environment_snapshot"`
	SHA256      string `json:"sha256"`
	JobKey      string `json:"job_key"`
	Rows        int64  `json:"rows"`
}

// Promote decisions.
const (
	DecisionPromoted        = "promoted"
	DecisionAlreadyPromoted = "already_promoted"
)

// CheckPromote checks, in production d (opened writable with the
// environment attached as EnvironmentCatalog: PromoteOpenOptions), that
// built job e of env may be promoted: the environment is complete and
// still holds what its build recorded, production's latest snapshot of
// the job is the one the environment was built against, each upstream it
// read from production is still at the snapshot it pinned, and the job's
// files still give the definition (transform, config, schema) the
// environment built from. done says production's latest snapshot already
// holds the environment's rows on top of that one (an earlier promote
// committed it). Anything else is refused (exit 3): production or the
// job's files moved, rebuild and review again.
func CheckPromote(ctx context.Context, d *run.DB, env *Environment, e Job, j *job.Job) (done *Promoted, err error) {
	q := d.SQL()
	if !env.Complete {
		return nil, report.Refuse("environment", "environment %s is incomplete (%s): run --env %s again", env.Name, envErrors(env), env.Name)
	}
	est, err := catalog.ReadStateIn(ctx, q, EnvironmentCatalog, e.Job)
	if err != nil {
		return nil, err
	}
	if est.Snapshot != e.Snapshot || est.Key != e.JobKey {
		return nil, report.Refuse("environment", "environment %s holds snapshot %d of %s, not the %d its build recorded: run --env %s again", env.Name, est.Snapshot, e.Job, e.Snapshot, env.Name)
	}
	for _, ref := range e.Upstream {
		if u, ok := env.Find(ref.Job); ok && u.Build {
			continue
		}
		st, err := catalog.ReadState(ctx, q, ref.Job)
		if err != nil {
			return nil, err
		}
		if st.Snapshot != ref.Snapshot || st.Key != ref.JobKey {
			why := ""
			if catalog.CheckNotExpired(ctx, q, ref.Job, ref.Snapshot) != nil {
				why = fmt.Sprintf("; production has expired snapshot %d ([retention])", ref.Snapshot)
			}
			return nil, report.Refuse("environment", "production moved since environment %s was built: %s read upstream %s at snapshot %d, production's latest is %d%s; run --env %s again and review its diff",
				env.Name, e.Job, ref.Job, ref.Snapshot, st.Snapshot, why, env.Name)
		}
	}
	st, err := catalog.ReadState(ctx, q, e.Job)
	if err != nil {
		return nil, err
	}
	if st.Snapshot == e.Production {
		return nil, checkFileDefinition(ctx, q, env, e, j)
	}
	if st.Snapshot > 0 {
		row, err := catalog.ReadSnapshot(ctx, q, e.Job, st.Snapshot)
		if err != nil {
			return nil, err
		}
		if row.Parent == e.Production {
			p, same, err := sameAsEnvironment(ctx, q, j)
			if err != nil {
				return nil, err
			}
			if same {
				p.Decision, p.Snapshot, p.EnvSnapshot, p.JobKey = DecisionAlreadyPromoted, st.Snapshot, e.Snapshot, st.Key
				return &p.Promoted, nil
			}
		}
	}
	return nil, report.Refuse("environment", "production moved since environment %s was built: its latest snapshot of %s is %d, the environment was built against %d; run --env %s again and review its diff",
		env.Name, e.Job, st.Snapshot, e.Production, env.Name)
}

func envErrors(env *Environment) string {
	var out []string
	for _, e := range env.Jobs {
		if e.Build && e.Error != "" {
			out = append(out, e.Job+": "+e.Error)
		}
	}
	if len(out) == 0 {
		return "its build did not finish"
	}
	return fmt.Sprint(out)
}

// PromoteOpenOptions are the options of production's open for promote:
// the environment attached read-only.
func PromoteOpenOptions(env *Environment, opts run.OpenOptions) run.OpenOptions {
	opts.Attach = []run.Attachment{{Alias: EnvironmentCatalog, Path: Path(env.Database, env.Name)}}
	return opts
}

// PromoteRunOptions make production's run of a built job commit only the
// rows the environment built: before COMMIT the run's key parts but the
// input must be those the environment's build recorded, and the target's
// canonical export must have the environment's sha256 (and the same
// columns), else the run is refused and rolls back. A model's rows are copied from the
// environment unless recompute, which runs its SELECT again in production
// over the same pinned upstream snapshots and so proves the environment's
// rows. got receives what was committed.
func PromoteRunOptions(env *Environment, e Job, j *job.Job, recompute bool, opts run.RunOptions, got *Promoted) run.RunOptions {
	opts.Note = fmt.Sprintf("promoted from environment %s (its snapshot %d)", env.Name, e.Snapshot)
	if j.IsModel() && !recompute {
		// A model's rows are copied from the environment, not computed
		// again; other jobs run as they ran there.
		opts.RowsFrom = sqltext.QuoteIdent(EnvironmentCatalog) + ".main." + sqltext.QuoteIdent(j.Table)
	}
	opts.BeforeCommit = func(ctx context.Context, tx *sql.Tx, res *run.Result) error {
		// The key production commits under must be the environment's but
		// for its input (the upstream snapshots): CheckPromote compared
		// what the files give; this compares every part the run computed
		// (a model's result columns, the input format).
		est, err := catalog.ReadStateIn(ctx, tx, EnvironmentCatalog, e.Job)
		if err != nil {
			return err
		}
		if est.HasParts {
			if err := checkDefinition(env, j, est.Parts, res.Parts); err != nil {
				return err
			}
		}
		p, same, err := sameAsEnvironment(ctx, tx, j)
		if err != nil {
			return err
		}
		if !same {
			return report.Refuse("environment", "%s built in production gives sha256 %s (%d rows), environment %s showed %s: nothing promoted", j.Name, p.SHA256, p.Rows, env.Name, p.envSHA)
		}
		*got = Promoted{Job: j.Name, Decision: DecisionPromoted, Snapshot: res.Snapshot, EnvSnapshot: e.Snapshot, SHA256: p.SHA256, JobKey: res.JobKey, Rows: p.Rows}
		return nil
	}
	return opts
}

type promotedSums struct {
	Promoted
	envSHA string
}

// sameAsEnvironment compares j's target in production, as q sees it, with
// the environment's: the same columns and types, and the same canonical
// export (sha256).
func sameAsEnvironment(ctx context.Context, q catalog.Querier, j *job.Job) (*promotedSums, bool, error) {
	prod, err := export.PinnedSource(ctx, q, j, "", 0)
	if err != nil {
		return nil, false, err
	}
	env, err := attachedSource(ctx, q, EnvironmentCatalog, j, prod)
	if err != nil {
		return nil, false, err
	}
	var sides [2]diff.Side
	if err := canonicalSums(ctx, q, [2]*export.TableSource{prod, env}, [2]*diff.Side{&sides[0], &sides[1]}); err != nil {
		return nil, false, err
	}
	p := &promotedSums{Promoted: Promoted{Job: j.Name, SHA256: sides[0].SHA256, Rows: sides[0].Rows}, envSHA: sides[1].SHA256}
	same := env.Snapshot > 0 && slices.Equal(prod.Columns, env.Columns) && slices.Equal(prod.Types, env.Types) && sides[0].SHA256 == sides[1].SHA256
	return p, same, nil
}
