// Environments: a change built beside production (idem run --env NAME),
// reviewed against it (idem diff --env NAME) and promoted into it (idem
// promote --env NAME).

package env

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/idem-dev/idem/internal/catalog"
	"github.com/idem-dev/idem/internal/job"
	"github.com/idem-dev/idem/internal/jobkey"
	"github.com/idem-dev/idem/internal/pipeline"
	"github.com/idem-dev/idem/internal/planner"
	"github.com/idem-dev/idem/internal/report"
	"github.com/idem-dev/idem/internal/run"
)

// ProductionCatalog is the name an environment's database attaches
// production under, read-only: the jobs it did not rebuild are read from
// there (run.RunOptions.External).
const ProductionCatalog = "idem_production"

// EnvironmentCatalog is the name promote attaches the environment under, in
// production's open, to check the rows it commits against it.
const EnvironmentCatalog = "idem_environment"

var envName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$`)

// CheckEnvName refuses an environment name that is not a plain file name.
func CheckEnvName(name string) error {
	if !envName.MatchString(name) {
		return report.Usage("--env %q: an environment name is 1 to 64 letters, digits, _ and -, starting with a letter or digit", name)
	}
	return nil
}

// Dir is the folder of the environments of database db.
func Dir(db string) string { return db + ".envs" }

// Path is the database file of environment name of database db.
func Path(db, name string) string { return filepath.Join(Dir(db), name+".duckdb") }

func envManifestPath(db, name string) string { return filepath.Join(Dir(db), name+".json") }

// ProductionReadPath is the file an environment reads production from: its
// read replica when it has one ([duckdb] read_replica), which production's
// writers never wait for; else the database itself, attached read-only
// while a job of the environment runs; "" when production has no database
// yet.
func ProductionReadPath(db string) string {
	if _, err := os.Stat(run.ReplicaPath(db)); err == nil {
		return run.ReplicaPath(db)
	}
	if _, err := os.Stat(db); err == nil {
		return db
	}
	return ""
}

// Job is one job of an environment: built in it, or read from
// production.
type Job struct {
	Job      string `json:"job"`
	Database string `json:"database"`
	// Build says the environment builds the job; otherwise it reads
	// production's committed snapshot of it, pinned, without copying it.
	Build  bool   `json:"build"`
	Reason string `json:"reason"`
	// Production is production's latest snapshot of the job when the
	// environment was built (0: production has none), and ProductionKey its
	// job key. Promote is refused when production has moved from it.
	Production    int64  `json:"production_snapshot"`
	ProductionKey string `json:"production_job_key,omitempty"`
	// Snapshot is the environment's snapshot of a built job, Upstream the
	// upstream snapshots it pinned (production's for the jobs read from
	// there), Decision its run's decision and Error why it failed.
	Snapshot int64                `json:"snapshot,omitempty"`
	JobKey   string               `json:"job_key,omitempty"`
	Upstream []jobkey.UpstreamRef `json:"upstream,omitempty"`
	Decision string               `json:"decision,omitempty"`
	Error    string               `json:"error,omitempty"`
}

// Environment is what idem run --env recorded of an environment of one
// database: <db>.envs/NAME.json beside <db>.envs/NAME.duckdb.
type Environment struct {
	Name     string    `json:"name"`
	Database string    `json:"database"`
	BuiltAt  time.Time `json:"built_at"`
	Complete bool      `json:"complete"`
	Jobs     []Job     `json:"jobs"`
}

// Built are the jobs the environment built, in run order.
func (e *Environment) Built() []Job {
	var out []Job
	for _, j := range e.Jobs {
		if j.Build {
			out = append(out, j)
		}
	}
	return out
}

// Find returns the environment's entry of job name.
func (e *Environment) Find(name string) (Job, bool) {
	for _, j := range e.Jobs {
		if j.Job == name {
			return j, true
		}
	}
	return Job{}, false
}

// SaveEnvironment writes e atomically (a temporary file renamed over it).
func SaveEnvironment(e *Environment) error {
	b, err := json.MarshalIndent(e, "", "  ")
	if err != nil {
		return err
	}
	path := envManifestPath(e.Database, e.Name)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// LoadEnvironment reads environment name of database db; a usage error
// (exit 2) when it was never built.
func LoadEnvironment(db, name string) (*Environment, error) {
	if err := CheckEnvName(name); err != nil {
		return nil, err
	}
	path := envManifestPath(db, name)
	st, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, report.Usage("no environment %s of database %s: build it with idem run DIR --env %s", name, db, name)
	}
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		// A FIFO would block the read for ever; a link could point
		// anywhere. idem writes a regular file (SaveEnvironment).
		return nil, fmt.Errorf("environment %s: %s is not a regular file", name, path)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var e Environment
	if err := json.Unmarshal(b, &e); err != nil {
		return nil, fmt.Errorf("environment %s: %s: %w", name, envManifestPath(db, name), err)
	}
	return &e, nil
}

// ListEnvironments lists the environments of database db by name.
func ListEnvironments(db string) ([]*Environment, error) {
	files, err := filepath.Glob(filepath.Join(Dir(db), "*.json"))
	if err != nil {
		return nil, err
	}
	var out []*Environment
	for _, f := range files {
		e, err := LoadEnvironment(db, strings.TrimSuffix(filepath.Base(f), ".json"))
		if err != nil {
			continue
		}
		out = append(out, e)
	}
	return out, nil
}

// EnvironmentBytes is the size of environment name's files.
func EnvironmentBytes(db, name string) int64 {
	return DatabaseBytes(Path(db, name)) + filesBytes(envManifestPath(db, name))
}

// DatabaseBytes is the size on disk of the database file at path and its
// WAL.
func DatabaseBytes(path string) int64 { return filesBytes(path, path+".wal") }

// filesBytes sums the sizes of the files that exist among paths.
func filesBytes(paths ...string) int64 {
	var n int64
	for _, f := range paths {
		if st, err := os.Stat(f); err == nil {
			n += st.Size()
		}
	}
	return n
}

// DropEnvironment removes environment name of database db.
func DropEnvironment(db, name string) error {
	if err := CheckEnvName(name); err != nil {
		return err
	}
	// The record goes first: an environment without it is not listed, and
	// a drop cut short is finished by the next.
	if err := os.Remove(envManifestPath(db, name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	// The database, its WAL, and what a run beside it keeps (retained
	// inputs, the erasure journal, a replica).
	files, err := filepath.Glob(Path(db, name) + "*")
	if err != nil {
		return err
	}
	for _, f := range files {
		if err := os.RemoveAll(f); err != nil {
			return err
		}
	}
	_ = os.Remove(Dir(db)) // only when empty
	return nil
}

// DropEnvironments drops every environment of database db, returning
// their names: an erasure in production drops them first, since what they
// built from production's rows may hold the erased subject (they are
// rebuilt with idem run --env).
func DropEnvironments(db string) ([]string, error) {
	envs, err := ListEnvironments(db)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range envs {
		if err := DropEnvironment(db, e.Name); err != nil {
			return names, err
		}
		names = append(names, e.Name)
	}
	// A database left by a drop cut short after its record went.
	if files, _ := filepath.Glob(filepath.Join(Dir(db), "*.duckdb")); len(files) > 0 {
		for _, f := range files {
			name := strings.TrimSuffix(filepath.Base(f), ".duckdb")
			if err := DropEnvironment(db, name); err != nil && !errors.Is(err, report.ErrUsage) {
				return names, err
			}
		}
	}
	return names, nil
}

// PlanEnvironment decides, for the jobs of one database in run order,
// which an environment builds: a job production has never committed, one
// whose definition changed (its key's transform, schema or config part
// against production's latest), and every job downstream of one it
// builds. The others are read from production. A job it would build but
// cannot is refused (exit 3): a stream or an apply job reading files
// (their state is the sum of every batch production applied), or an
// apply job reading the changes of an upstream that production holds.
func PlanEnvironment(ctx context.Context, name string, jobs []*job.Job, open func(*job.Job) run.OpenOptions) (*Environment, error) {
	if len(jobs) == 0 {
		return nil, report.Usage("no job to build in environment %s", name)
	}
	env := &Environment{Name: name, Database: jobs[0].Database, BuiltAt: time.Now().UTC()}
	states := map[string]catalog.State{}
	if path := ProductionReadPath(env.Database); path != "" {
		opts := open(jobs[0])
		opts.ReadOnly, opts.Attach = true, nil
		d, err := run.OpenReader(ctx, env.Database, opts, func(*run.ReplicaNote) bool { return true })
		if err != nil {
			return nil, err
		}
		for _, j := range jobs {
			st, err := catalog.ReadState(ctx, d.SQL(), j.Name)
			if err != nil {
				d.Close()
				return nil, err
			}
			states[j.Name] = st
		}
		if err := d.Close(); err != nil {
			return nil, err
		}
	}
	built := map[string]bool{}
	for _, j := range jobs {
		st := states[j.Name]
		e := Job{Job: j.Name, Database: j.Database, Production: st.Snapshot, ProductionKey: st.Key}
		var ups []string
		for _, u := range j.SortedUpstream() {
			if built[u] {
				ups = append(ups, u)
			}
		}
		switch {
		case len(ups) > 0:
			e.Build, e.Reason = true, "reads "+strings.Join(ups, ", ")+", built in the environment"
		case !st.Exists || st.Snapshot == 0:
			e.Build, e.Reason = true, "production has no snapshot of it"
		default:
			changed, err := definitionChanged(ctx, j, st, open(j))
			if err != nil {
				return nil, err
			}
			if len(changed) > 0 {
				e.Build, e.Reason = true, strings.Join(changed, ", ")+" changed"
			} else {
				e.Reason = fmt.Sprintf("reads production's snapshot %d (nothing of it changed)", st.Snapshot)
			}
		}
		if e.Build {
			if err := canBuild(j, built); err != nil {
				return nil, err
			}
			built[j.Name] = true
		}
		env.Jobs = append(env.Jobs, e)
	}
	return env, nil
}

// definitionChanged names the parts of j's definition that differ from
// production's latest snapshot of it (st): transform, config, schema; its
// input (files, upstream snapshots) does not count. A job whose key a plan
// computes is planned against production, read-only, as --select
// state:modified does; a stream or an apply job reading files compares the
// parts its file defines.
func definitionChanged(ctx context.Context, j *job.Job, st catalog.State, open run.OpenOptions) ([]string, error) {
	var changed []string
	if j.IsStream() || (j.Pipeline.Mode == pipeline.ModeApply && j.ReadsFiles()) {
		if !st.HasParts {
			return []string{jobkey.PartTransform}, nil
		}
		now := st.Parts
		now.Transform, now.Schema = j.TransformPart(), j.SchemaPart()
		changed = now.Changed(st.Parts)
	} else {
		plan, err := planner.PlanRun(ctx, j.Database, j, run.RunOptions{}, open)
		if err != nil {
			return nil, fmt.Errorf("plan %s against production: %w", j.Name, err)
		}
		if plan.Refusal != nil {
			// What production would refuse (a released model edited in
			// place, a retyped key), the environment refuses too.
			return nil, plan.Refusal
		}
		if plan.FirstLoad {
			return []string{jobkey.PartTransform}, nil
		}
		changed = plan.Changed
	}
	return slices.DeleteFunc(slices.Clone(changed), func(p string) bool { return p == jobkey.PartInput }), nil
}

// canBuild refuses a job an environment cannot build from production's
// pinned snapshots.
func canBuild(j *job.Job, built map[string]bool) error {
	switch {
	case j.IsStream():
		return report.Refuse("environment", "job %s reads a %s stream: its target is every batch production applied, which an environment cannot rebuild; change it in production", j.Name, j.Input.Stream.Kind)
	case j.Pipeline.Mode == pipeline.ModeApply && j.ReadsFiles():
		return report.Refuse("environment", "job %s applies batches of files: its target is every batch production applied, which an environment cannot rebuild; change it in production", j.Name)
	case j.Pipeline.Mode == pipeline.ModeApply:
		for _, u := range j.SortedUpstream() {
			if !built[u] {
				return report.Refuse("environment", "job %s applies the changes of upstream %s, which the environment reads from production: changes are read from the history of the job's own database; change it in production", j.Name, u)
			}
		}
	}
	return nil
}

// RunOptions are the options of an environment's run of job j: the
// upstreams it did not build are read from production.
func RunOptions(env *Environment, j *job.Job, opts run.RunOptions) run.RunOptions {
	// The jobs its relationships audits check against too (run.runAudit).
	for _, u := range append(j.SortedUpstream(), j.AuditUpstream()...) {
		// An upstream the environment does not build (or that --select
		// left out) is read from production.
		if e, ok := env.Find(u); !ok || !e.Build {
			if opts.External == nil {
				opts.External = map[string]string{}
			}
			opts.External[u] = ProductionCatalog
		}
	}
	return opts
}

// OpenOptions are the options of an environment's open: production
// attached read-only, when it has a database.
func OpenOptions(env *Environment, opts run.OpenOptions) run.OpenOptions {
	if path := ProductionReadPath(env.Database); path != "" {
		opts.Attach = []run.Attachment{{Alias: ProductionCatalog, Path: path}}
	}
	return opts
}

// RecordEnvBuilds reads back, from the environment's database, the
// snapshot each built job committed and the upstreams it pinned; errs are
// the jobs' run errors, by name. The environment is complete when every
// job it builds has a snapshot of this build.
func RecordEnvBuilds(ctx context.Context, env *Environment, errs map[string]error, open run.OpenOptions) error {
	env.Complete = true
	var states map[string]catalog.State
	if _, err := os.Stat(Path(env.Database, env.Name)); err == nil {
		open.ReadOnly, open.Attach = true, nil
		d, err := run.Open(ctx, Path(env.Database, env.Name), open)
		if err != nil {
			return err
		}
		defer d.Close()
		states = map[string]catalog.State{}
		for _, e := range env.Jobs {
			if !e.Build {
				continue
			}
			st, err := catalog.ReadState(ctx, d.SQL(), e.Job)
			if err != nil {
				return err
			}
			states[e.Job] = st
		}
	}
	for i := range env.Jobs {
		e := &env.Jobs[i]
		if !e.Build {
			continue
		}
		if err := errs[e.Job]; err != nil {
			e.Error, env.Complete = err.Error(), false
			continue
		}
		st, ok := states[e.Job]
		if !ok || !st.Exists || st.Snapshot == 0 {
			e.Error, env.Complete = "not built", false
			continue
		}
		e.Snapshot, e.JobKey, e.Error = st.Snapshot, st.Key, ""
		if st.HasParts {
			e.Upstream = st.Parts.Upstream
		}
	}
	return nil
}
