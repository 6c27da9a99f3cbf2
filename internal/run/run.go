package run

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"slices"
	"time"

	"github.com/idem-dev/idem/internal/catalog"
	"github.com/idem-dev/idem/internal/job"
	"github.com/idem-dev/idem/internal/jobkey"
	"github.com/idem-dev/idem/internal/pipeline"
	"github.com/idem-dev/idem/internal/report"
	"github.com/idem-dev/idem/internal/source"
)

// Fault points: a RunOptions.Fault hook is called with each name as the run
// passes it. The CLI uses them to kill itself in crash tests (see
// docs/reliability.md). FaultCheckpoint is called once the commit is made,
// just before a CHECKPOINT after it would start, and FaultAfterCheckpoint
// once it returned, so a hook can kill the process while the checkpoint
// runs. Most commits are not checkpointed there (settle.go): the two
// points then pass one after the other with the commit in the WAL only,
// and the checkpoint comes later, between FaultSettle and
// FaultAfterSettle.
const (
	FaultBeforeBegin     = "before_begin"
	FaultAfterStep       = "after_step:" // followed by the step file name
	FaultAfterTarget     = "after_target"
	FaultBeforeCommit    = "before_commit"
	FaultAfterCommit     = "after_commit"
	FaultCheckpoint      = "checkpoint"
	FaultAfterCheckpoint = "after_checkpoint"
)

// RunOptions are the per-invocation settings of a run; none is part of the
// job key.
type RunOptions struct {
	Input        string // overrides the job's [input] path
	BatchID      string // apply mode; default: the input file's base name
	From, To     *int64 // apply mode: the batch covers source positions (From, To]
	Epoch        *int64 // refuse unless this is the job's writer epoch
	ExpectParent *int64 // refuse unless the job's latest snapshot is this
	// Partitions are the partitions a run of a partitioned job replaces
	// (--partitions); nil: the partitions its staged rows hold.
	Partitions []string
	Fault      func(point string)
	Progress   report.Progress
	// FailAfterTarget injects an error after the target is written and
	// before COMMIT (tests of the all-or-nothing commit).
	FailAfterTarget bool
	// SkipHistory writes no history row: the floor that cmd/idem-bench
	// measures the cost of history against (IDEM_BENCH_NO_HISTORY=1, read
	// only by the idem it builds with -tags idembench). Not a user
	// setting: pinned reads of the snapshots it commits are wrong.
	SkipHistory bool

	// Note is written in the run log row of the commit (a stream gap
	// accepted with --allow-gap).
	Note string

	// SkipAudits runs no [[audit]]: a rerun replays what was committed,
	// whatever the audits say now (they are not part of the job key).
	SkipAudits bool

	// Rejects are the recorded rejects of the stream batch a rerun
	// replays: the same rows get the same invalid_* outcomes.
	Rejects []catalog.Reject

	// Source is what the run reads; nil reads the job's [input] (or
	// Input). RunFiles, RunChunks and rerun pass files already listed.
	Source source.Input

	// External reads the upstream jobs it names from the idem database
	// attached under the catalog alias given (OpenOptions.Attach): an
	// environment's run reads production's committed snapshots of the
	// jobs it does not rebuild (source.Upstream.External).
	External map[string]string

	// BeforeCommit, when set, is called once every phase of a run that
	// would commit has run, inside its transaction, before COMMIT: an error
	// rolls the run back as a failed phase would (idem promote checks that
	// the rows it is about to commit are those the environment showed).
	BeforeCommit func(ctx context.Context, tx *sql.Tx, res *Result) error

	// RowsFrom, for a select model, takes the target's rows from this
	// relation instead of running the model's SELECT: idem promote copies
	// what an environment built (attached read-only) rather than
	// computing it again. Everything else is the model's: its key, its
	// pinned upstreams, the SQL recorded; BeforeCommit checks the rows.
	RowsFrom string

	// FullRefresh rebuilds a refresh job (a model, a refresh pipeline) or
	// a seed from its inputs as a new snapshot even when its key is
	// unchanged, and an incremental model whole (run --full-refresh).
	// Another apply job is a usage error (see FullRefreshes).
	FullRefresh bool

	// Expire, when set, is called after a run of a job with [retention]
	// keep_snapshots that committed or found nothing to commit, to expire
	// its old snapshots in a transaction of its own (history.ExpireAfterRun;
	// a replay in a scratch database sets none). A kill between the run's
	// COMMIT and the expiry's loses nothing: the next run finishes it.
	Expire Expirer

	// pending is set by RunFiles on the batch of a file it found not
	// committed: the run writes unless a guard refuses, so it waits for the
	// gate without deciding first in a transaction of its own (RunTogether).
	pending bool
}

// Expirer expires the old snapshots of job j ([retention] keep_snapshots)
// in a transaction of its own, passing fault the expiry's fault points.
type Expirer func(ctx context.Context, d *DB, j *job.Job, fault func(string)) (*Expiry, error)

// Expiry reports the expiry that followed a run.
type Expiry struct {
	// OldestKept is the job's oldest readable snapshot after it.
	OldestKept int64 `json:"oldest_kept"`
	// Expired counts the snapshots it expired (0: nothing was due).
	Expired int64 `json:"expired"`
	// Error says why it failed; the run's commit stands and the next run
	// or idem expire retries it.
	Error string `json:"error,omitempty"`
}

// expireAfter runs opts.Expire after a run (see RunOptions.Expire). Its
// failure does not undo the run: it is reported in res.Expiry.
func (d *DB) expireAfter(ctx context.Context, j *job.Job, opts RunOptions, res *Result) {
	if opts.Expire == nil || j.Retention.KeepSnapshots <= 0 || res == nil {
		return
	}
	// The expiry logs a commit of its own: the run log rows deferred
	// before it go first (runlog.go).
	if err := d.flushDeferred(ctx); err != nil {
		res.Expiry = &Expiry{Error: err.Error()}
		return
	}
	e, err := opts.Expire(ctx, d, j, opts.Fault)
	if err != nil {
		res.Expiry = &Expiry{Error: err.Error()}
		return
	}
	res.Expiry = e
}

// Result is what a run reports.
type Result struct {
	Job         string             `json:"job"`
	Pipeline    string             `json:"pipeline"`
	Mode        string             `json:"mode"`
	Decision    string             `json:"decision"`
	Changed     []string           `json:"changed"`
	FirstLoad   bool               `json:"first_load"`
	JobKey      string             `json:"job_key"`
	Snapshot    int64              `json:"snapshot"`
	Parent      int64              `json:"parent"`
	BatchID     string             `json:"batch_id,omitempty"`
	RowsIn      int64              `json:"rows_in"`
	RowsOut     int64              `json:"rows_out"`
	Outcomes    map[string]int64   `json:"outcomes"`
	Cursor      int64              `json:"cursor"`
	Epoch       int64              `json:"epoch"`
	Target      string             `json:"target"`
	InputSHA256 string             `json:"input_sha256"`
	Inputs      []source.InputFile `json:"inputs"`
	Parts       jobkey.Parts       `json:"parts"`
	// IgnoredColumns names, as "file: column", the input columns that
	// [input] extra_columns = "ignore" skipped.
	IgnoredColumns []string `json:"ignored_columns,omitempty"`
	// Audits are the results of the job's [[audit]] checks.
	Audits []AuditResult `json:"audits,omitempty"`
	// Note says what the run did beyond its batch: it took an upstream's
	// rows over the job's newer ones, the upstream having been rolled back
	// below what the job applied.
	Note string `json:"note,omitempty"`

	// RowsWritten is what this run wrote (see countWritten), beside
	// RowsOut, the target's row count after the run; 0 when it wrote
	// nothing.
	RowsWritten int64 `json:"rows_written"`
	// Upstream lists the upstream jobs the run pinned, with the snapshot
	// its job had pinned before; absent for a job that reads only files.
	Upstream []UpstreamChange `json:"upstream,omitempty"`
	// Conflicts is the number of conflict rows the target holds after a
	// committed run, for a pipeline that keeps conflicts in its target
	// (ConflictColumn); null otherwise.
	Conflicts *int64 `json:"conflicts"`
	// Replica reports the read replica published after the commit
	// ([duckdb] read_replica); absent when none was.
	Replica *ReplicaInfo `json:"replica,omitempty"`
	// Partitions are the partitions a partitioned job's run replaced, and
	// Repaired the other partitions it removed a moved key from; absent
	// for a job without [target] partition_by.
	Partitions []string `json:"partitions,omitempty"`
	Repaired   []string `json:"repaired_partitions,omitempty"`
	// Incremental, for an incremental model, is "partition" when the run
	// recomputed only the partitions whose upstream rows changed (listed
	// in Partitions), "key" when it recomputed only the keys whose
	// upstream rows changed (Keys of them), or "full" when it rebuilt the
	// whole target, with IncrementalNote saying why when it is not a first
	// load.
	Incremental     string `json:"incremental,omitempty"`
	IncrementalNote string `json:"incremental_note,omitempty"`
	Keys            int64  `json:"keys,omitempty"`
	// Expiry reports the expiry of old snapshots that followed the run
	// ([retention] keep_snapshots); absent without one.
	Expiry *Expiry `json:"expiry,omitempty"`
	// FullRefresh says the run rebuilt the target whole, whatever its key
	// (RunOptions.FullRefresh).
	FullRefresh bool `json:"full_refresh,omitempty"`

	// packet is the release packet's JSON the packet phase made, written
	// with the snapshot row (writeCommitRows); "" when none.
	packet string
}

// Prepared is everything a run computes before it opens its transaction.
type Prepared struct {
	// macros is set once the run's transaction holds the job's macros
	// (CreateMacros): made where the model is first described (pin), or
	// where the input is staged.
	macros  bool
	input   source.Input
	in      *source.Resolved
	files   []source.InputFile // in.Files
	format  string             // in.Format
	chunk   *source.Chunk      // in.Chunk
	parts   jobkey.Parts
	key     string
	batchID string
	digest  string // the ledger's batch digest: input digest plus bounds
	// scrubbed are retained raw copies replaced by copies without erased
	// rows; they are deleted after the commit (see scrubErased).
	scrubbed []string
	// received are the sha256 and size of each input file (by path) as
	// read, where scrubErased replaced its retained copy: a files-mode
	// job's file record keeps them, so that the file is known again.
	received map[string]source.InputFile
	// retained is set once the run starts copying its input into the
	// store: a run that then commits nothing sweeps its copy away.
	retained bool
	// unchanged is set by an apply run over upstream changes when no
	// upstream moved past the snapshot its state pinned: it skips.
	unchanged bool
	// orderFree is set by the decision of a run that writes when the job is
	// a model ModelOrderFree proves order-free: its steps read the
	// upstreams' views and run on the job's threads.
	orderFree bool
}

// FullRefreshes says whether RunOptions.FullRefresh rebuilds j: a refresh
// job or model, or a seed (a reference table, [input] mode = "replace",
// whose file is the whole table). Other apply jobs' targets are the fold
// of their batches.
func FullRefreshes(j *job.Job) bool {
	return j.Pipeline.Mode == pipeline.ModeRefresh || j.Input.Mode == job.InputModeReplace
}

// Prepare is what a run of j computes before its transaction: it resolves
// the input and derives the job key, the batch id and the batch digest.
func Prepare(ctx context.Context, j *job.Job, opts RunOptions) (*Prepared, error) {
	if (opts.From == nil) != (opts.To == nil) {
		return nil, report.Usage("--from and --to go together")
	}
	if opts.FullRefresh && !FullRefreshes(j) {
		return nil, report.Usage("--full-refresh rebuilds a refresh job, a model or a seed ([input] mode = \"replace\"); %s is an apply job, whose target is the fold of its batches (idem rerun %s --from-start rebuilds and proves it)", j.Name, j.Name)
	}
	if opts.From != nil {
		if j.Pipeline.Mode != pipeline.ModeApply {
			return nil, report.Usage("--from/--to apply to apply-mode jobs; %s is a %s job", j.Name, j.Pipeline.Mode)
		}
		if *opts.To <= *opts.From {
			return nil, report.Usage("--to %d must be greater than --from %d: a batch covers (from, to]", *opts.To, *opts.From)
		}
	}
	if opts.Partitions != nil && j.PartitionBy == "" {
		return nil, report.Usage("--partitions: job %s declares no [target] partition_by", j.Name)
	}
	if opts.Partitions != nil && j.Incremental != "" && opts.Source == nil {
		return nil, report.Usage("--partitions: job %s is an incremental model: each run recomputes the partitions whose upstream rows changed", j.Name)
	}
	if opts.Partitions != nil {
		var list []string
		for _, v := range opts.Partitions {
			if !slices.Contains(list, v) {
				list = append(list, v)
			}
		}
		if len(list) == 0 {
			return nil, report.Usage("--partitions names no partition")
		}
		slices.Sort(list)
		opts.Partitions = list
	}
	input := opts.Source
	switch {
	case input != nil:
	case j.IsStream():
		return nil, report.Usage("job %s reads a %s stream: only idem run reads it, a batch at a time from the committed positions", j.Name, j.Input.Stream.Kind)
	case j.ReadsIceberg():
		if opts.Input != "" {
			return nil, report.Usage("--input: job %s reads an Iceberg table ([input] iceberg), not files", j.Name)
		}
		input = &source.Iceberg{Job: j}
	case !j.ReadsFiles():
		if opts.Input != "" {
			return nil, report.Usage("--input: job %s reads upstream jobs ([input] upstream), not files", j.Name)
		}
		up := &source.Upstream{Job: j, External: opts.External}
		if j.Pipeline.Mode == pipeline.ModeApply {
			if err := checkChangesRun(j, opts); err != nil {
				return nil, err
			}
			up.Changes = true // upstream_changes.go
		}
		input = up
	default:
		input = &source.Files{Job: j, Path: opts.Input, Progress: opts.Progress}
	}
	in, err := input.Resolve(ctx)
	if err != nil {
		return nil, err
	}
	files, format := in.Files, in.Format
	parts := jobkey.Parts{
		Input:     in.Digest,
		Transform: j.TransformPart(),
		Config:    j.Config(format),
		Schema:    j.SchemaPart(),
	}
	parts.Partitions = opts.Partitions
	p := &Prepared{input: input, in: in, files: files, format: format, chunk: in.Chunk, parts: parts, key: parts.Key()}
	p.digest = parts.Input
	// An apply run over upstream changes learns its batch when it pins
	// them, inside its transaction (pinChanges).
	if up, ok := input.(*source.Upstream); ok && up.Changes {
		p.digest = ""
	} else if j.Pipeline.Mode == pipeline.ModeApply {
		p.batchID = opts.BatchID
		if p.batchID == "" && len(files) == 0 {
			p.batchID = in.BatchID // an input without files names its batch
		} else if p.batchID == "" {
			p.batchID = filepath.Base(files[0].Path)
			if len(files) > 1 {
				p.batchID = "files-" + parts.Input[:16]
			}
		}
		if opts.From != nil {
			p.digest = pipeline.DigestString(string(jobkey.CanonicalJSON(map[string]any{
				"input": parts.Input, "from": *opts.From, "to": *opts.To,
			})))
		}
		if p.chunk != nil {
			p.batchID, p.digest = p.chunk.Name(p.parts.Input, files)
			if opts.BatchID != "" {
				p.batchID = opts.BatchID // a rerun replays a recorded chunk
			}
		}
	}
	return p, nil
}

// Run runs job once: one transaction on one pinned connection that either
// commits the target, its history, the outcomes, the ledger, the snapshot
// and the state row together, or changes nothing. A run refused by a guard
// returns a *RefusedError; skipped and already-committed runs return a
// Result and no error.
func (d *DB) Run(ctx context.Context, j *job.Job, opts RunOptions) (*Result, error) {
	res, err := d.run(ctx, j, opts)
	return res, report.Fatal(err)
}

func (d *DB) run(ctx context.Context, j *job.Job, opts RunOptions) (*Result, error) {
	res, err := d.RunTogether(ctx, []JobRun{{Job: j, Opts: opts}}) // together.go
	if err != nil {
		return nil, err
	}
	return res[0], nil
}

func fault(opts RunOptions, point string) {
	if opts.Fault != nil {
		opts.Fault(point)
	}
}

// logOutside records a run that committed nothing (refused, failed: err)
// in the run log, in its own short transaction after the rollback, without
// row values (logMessage).
func (d *DB) logOutside(j *job.Job, p *Prepared, decision string, runErr error) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	st, err := catalog.ReadState(ctx, d.sql, j.Name)
	if err != nil {
		return fmt.Errorf("write run log: %w", err)
	}
	var changed []string
	if st.HasParts {
		changed = p.parts.Changed(st.Parts)
	}
	return insertRun(ctx, d, &catalog.RunRow{Job: j.Name, BatchID: p.batchID, Decision: decision,
		Changed: string(jobkey.CanonicalJSON(report.NonNil(changed))), Snapshot: st.Snapshot, Cursor: st.Cursor, Epoch: st.Epoch, Message: logMessage(runErr)})
}

// phaseNames name runTx's phases for IDEM_TIMINGS.
var phaseNames = []string{"guards", "retain", "stage", "steps", "partitions", "balance", "audits", "history", "packet", "commit rows", "checkpoint image"}

// runTx is the transaction of one run as a list of phases, each a method
// of txRun below. A phase that finds nothing to write stops the list and
// the run commits nothing (skipped, already committed); an error rolls it
// back. committed is true when every phase ran and COMMIT may follow.
func (d *DB) runTx(ctx context.Context, tx *sql.Tx, j *job.Job, p *Prepared, opts RunOptions, learn *guardLearn) (res *Result, committed bool, err error) {
	r := &txRun{d: d, tx: tx, j: j, p: p, opts: opts, learn: learn}
	for i, phase := range []func(context.Context) (bool, error){
		r.guards,     // the state row and every guard (decide)
		r.retain,     // copy the input into the store and record it
		r.stage,      // bind the variables, stage the input as view input
		r.steps,      // erasures, the target's DDL, the steps and quality rules
		r.partitions, // partitioned: replace only the declared partitions
		r.balance,    // exactly one outcome per staged row
		r.audits,     // [[audit]] checks of the target (audits.go)
		r.history,    // scrub erased rows, history, rows written
		r.packet,     // the release packet (packet.go)
		r.commitRows, // ledger, snapshot, state, run log and file rows
		r.checkpoint, // [retention] checkpoint_every: the state's image (checkpoint.go)
	} {
		var done func()
		if opts.Progress.Timings {
			done = opts.Progress.Start("phase " + phaseNames[i])
		}
		more, err := phase(ctx)
		if done != nil {
			done()
		}
		if err != nil {
			return nil, false, err
		}
		if !more {
			// Nothing to write (skipped, already committed): the macros
			// pin made go, so that the connection keeps none.
			if p.macros {
				if err := DropMacros(ctx, tx, j); err != nil {
					return nil, false, err
				}
			}
			return r.res, false, nil
		}
	}
	return r.res, true, nil
}
