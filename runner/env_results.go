package runner

import (
	"time"

	"github.com/idem-dev/idem/internal/env"
)

// The results of the environment verbs (Environments, Promote): the JSON
// keys are those of idem env list --json and idem promote --json, kept in
// step with the internal types by TestResultsInStep.

// Environment is an environment of one database as idem run --env
// recorded it (<db>.envs/NAME.json), or as it would build it
// (Project.PlanEnvironment). The JSON keys are those of idem plan --env
// --json.
type Environment struct {
	Name     string    `json:"name"`
	Database string    `json:"database"`
	BuiltAt  time.Time `json:"built_at"`
	// Complete says every job it builds was built.
	Complete bool     `json:"complete"`
	Jobs     []EnvJob `json:"jobs"`
}

// EnvironmentFile is an environment with the bytes of its database file
// and of production's (each with its WAL). The JSON keys are those of idem
// env list --json.
type EnvironmentFile struct {
	Environment
	Bytes      int64 `json:"bytes"`
	Production int64 `json:"production_bytes"`
}

// Built are the jobs the environment built, in run order.
func (e *Environment) Built() []EnvJob {
	var out []EnvJob
	for _, j := range e.Jobs {
		if j.Build {
			out = append(out, j)
		}
	}
	return out
}

// EnvJob is one job of an environment: built in it (Build), or read from
// production's committed snapshot, pinned, without copying it.
type EnvJob struct {
	Job      string `json:"job"`
	Database string `json:"database"`
	Build    bool   `json:"build"`
	Reason   string `json:"reason"`
	// Production is production's latest snapshot of the job when the
	// environment was built (0: none), ProductionKey its job key.
	Production    int64  `json:"production_snapshot"`
	ProductionKey string `json:"production_job_key,omitempty"`
	// Snapshot is the environment's snapshot of a built job, Upstream the
	// upstream snapshots it pinned, Decision its run's decision and Error
	// why it failed.
	Snapshot int64         `json:"snapshot,omitempty"`
	JobKey   string        `json:"job_key,omitempty"`
	Upstream []UpstreamRef `json:"upstream,omitempty"`
	Decision string        `json:"decision,omitempty"`
	Error    string        `json:"error,omitempty"`
}

// UpstreamRef is an upstream snapshot a run pinned, with its job key.
type UpstreamRef struct {
	Job      string `json:"job"`
	Snapshot int64  `json:"snapshot"`
	JobKey   string `json:"job_key"`
}

// PromoteResult reports a promote. The JSON keys are those of idem
// promote --json.
type PromoteResult struct {
	Promoted []*Promoted `json:"promoted"`
}

// Promoted is one job a promote committed into production, or found
// committed by an earlier promote of the environment.
type Promoted struct {
	Job string `json:"job"`
	// Decision is promoted, or already_promoted (a promote cut short and
	// run again).
	Decision string `json:"decision"`
	// Snapshot is production's snapshot holding the environment's rows,
	// EnvSnapshot the environment's.
	Snapshot    int64  `json:"snapshot"`
	EnvSnapshot int64  `json:"environment_snapshot"`
	SHA256      string `json:"sha256"`
	JobKey      string `json:"job_key"`
	Rows        int64  `json:"rows"`
}

// The decisions of a Promoted.
const (
	DecisionPromoted        = env.DecisionPromoted
	DecisionAlreadyPromoted = env.DecisionAlreadyPromoted
)

// EnvDiff compares a job as an environment built it with production's
// latest snapshot of it. The JSON keys are those of idem diff --env
// --json.
type EnvDiff struct {
	DiffResult
	Environment string `json:"environment"`
	// Reason is why the environment built the job.
	Reason string `json:"reason"`
	// Numeric sums and bounds, for each numeric column both sides share
	// (the key aside), the differences environment minus production over
	// the rows whose key both hold.
	Numeric []NumericDifference `json:"numeric"`
	// New says production has no snapshot of the job: every row is added.
	New bool `json:"new,omitempty"`
	// Moved names the upstreams read from production that production has
	// moved past since the environment was built: promote is refused
	// until it is rebuilt.
	Moved []string `json:"moved,omitempty"`
	// Edited names what the job's files now give otherwise than the
	// environment was built from: promote is refused until it is rebuilt.
	Edited []string `json:"edited,omitempty"`
}

// NumericDifference is the sum and the largest absolute value of one
// numeric column's differences over the rows paired by key, as text.
type NumericDifference struct {
	Column string `json:"column"`
	Sum    string `json:"sum"`
	MaxAbs string `json:"max_abs"`
}
