package runner

import (
	"context"
	"time"

	"github.com/idem-dev/idem/internal/job"
	"github.com/idem-dev/idem/internal/report"
	"github.com/idem-dev/idem/internal/run"
)

// StreamOptions say how a run reads a job reading a stream (JobInfo.Reads
// ReadsStream: [input] kind = "kafka", "sse" or "iceberg"), as idem run's
// flags of the same names do. The zero StreamOptions applies one batch.
type StreamOptions struct {
	// Follow keeps applying batches, each in its own transaction, until
	// ctx ends (the batch in flight commits or rolls back whole, and the
	// run returns no error), MaxBatches batches committed (> 0), or
	// IdleExit passed without a record (> 0).
	Follow     bool
	MaxBatches int
	IdleExit   time.Duration
	// AllowGap accepts the records the source deleted before they were
	// read, and logs the gap; without it a gap is refused (ErrRefused).
	AllowGap bool
	// OnBatch, when set, is called with each batch as it commits (and,
	// for a run that does not follow, with its read that found nothing
	// new), from the goroutine that runs the job: under WithConcurrency
	// above 1, from several goroutines at once.
	OnBatch func(*StreamBatch)
	// OnYield, when set, is called after a follow run let another
	// command waiting for the database have it between two batches, with
	// how long it let go.
	OnYield func(job string, took time.Duration)
}

// WithStream makes runs of stream jobs (Project.RunJob, Project.Run) read
// as o says. Follow and AllowGap given to a job that reads no stream fail
// its run (ErrUsage), as do MaxBatches or IdleExit without Follow and
// negative limits.
func WithStream(o StreamOptions) Option {
	return optionFunc(func(s *settings) error {
		s.stream = o
		return nil
	})
}

// check refuses the stream options a run of job name cannot use; stream
// says the job reads a stream. The words are the idem command's flags.
func (o StreamOptions) check(stream bool, name string) error {
	if !stream && (o.Follow || o.AllowGap) {
		return report.Usage("--follow and --allow-gap apply to a job reading a stream ([input] kind = \"kafka\"); %s reads files", name)
	}
	if !o.Follow && (o.MaxBatches != 0 || o.IdleExit != 0) {
		return report.Usage("--max-batches and --idle-exit go with --follow")
	}
	if o.MaxBatches < 0 || o.IdleExit < 0 {
		return report.Usage("--max-batches and --idle-exit must not be negative")
	}
	return nil
}

// StreamBatch is what one batch of a stream job did. The JSON keys are
// those of idem run --json for a stream job, one object per batch.
type StreamBatch struct {
	Job string `json:"job"`
	// Decision is applied, already_committed, or skipped (nothing past
	// the committed positions: nothing written).
	Decision Decision `json:"decision"`
	// BatchID names the batch after the ranges it read.
	BatchID  string `json:"batch_id"`
	Snapshot int64  `json:"snapshot"`
	// Records counts the records read, Replayed those read again that an
	// earlier batch had applied (skipped).
	Records  int              `json:"records"`
	Replayed int              `json:"replayed"`
	Ranges   []StreamRange    `json:"ranges"`
	RowsIn   int64            `json:"rows_in"`
	Outcomes map[string]int64 `json:"outcomes"`
	// Positions are the committed next positions after the batch, per
	// partition; Lag how many records each partition's log holds past
	// them, when the source knows its ends.
	Positions     map[string]int64 `json:"positions"`
	Lag           map[string]int64 `json:"lag,omitempty"`
	RecordsPerSec float64          `json:"records_per_sec"`
	// Gap says which records the source lost before they were read
	// (StreamOptions.AllowGap).
	Gap string `json:"gap,omitempty"`
	// Rejected are the records read as an invalid_* outcome, each naming
	// its partition and position.
	Rejected []StreamReject `json:"rejected,omitempty"`
	// Deletes counts the Kafka tombstones read as a delete row.
	Deletes int    `json:"deletes,omitempty"`
	JobKey  string `json:"job_key"`
	// Run is the committed run's Result; nil when nothing was committed.
	Run *Result `json:"-"`

	rejectNote string
}

// RejectNote says which records the batch rejected, as the run log
// records it ("rejected 2 record(s): 0:17 invalid_json, ..."); "" when
// none.
func (b *StreamBatch) RejectNote() string { return b.rejectNote }

// StreamRange is the positions a batch read from one partition.
type StreamRange struct {
	Partition string `json:"partition"`
	First     int64  `json:"first"`
	Last      int64  `json:"last"`
	Records   int    `json:"records"`
}

// StreamReject is a record a batch read that the pipeline cannot read:
// its row in the batch, partition, position, outcome, size and first
// bytes.
type StreamReject struct {
	Row       int64  `json:"row"`
	Partition string `json:"partition"`
	Position  int64  `json:"position"`
	Outcome   string `json:"outcome"`
	Bytes     int    `json:"bytes"`
	Prefix    string `json:"prefix"`
}

// streamBatchOf is the public copy of sr.
func streamBatchOf(sr *run.StreamResult) (*StreamBatch, error) {
	var out StreamBatch
	if err := convert(sr, &out); err != nil {
		return nil, err
	}
	out.rejectNote = run.RejectNote(sr.Rejected)
	if sr.Run != nil {
		r, err := resultOf(sr.Run)
		if err != nil {
			return nil, err
		}
		out.Run = r
	}
	return &out, nil
}

// runStream runs stream job j on db as WithStream says: one batch, whose
// Result it returns (a Result of its own when nothing was committed), or
// with Follow batch after batch, returning a Result whose Runs are the
// batches committed (also beside an error that stopped it).
func (p *Project) runStream(ctx context.Context, db *run.DB, j *job.Job, opts run.RunOptions) (*Result, error) {
	so := p.s.stream
	ro := run.StreamOptions{AllowGap: so.AllowGap, Follow: so.Follow, MaxBatches: so.MaxBatches, IdleExit: so.IdleExit}
	var convErr error
	if so.OnBatch != nil {
		ro.OnBatch = func(sr *run.StreamResult) {
			b, err := streamBatchOf(sr)
			if err != nil {
				convErr = err
				return
			}
			so.OnBatch(b)
		}
	}
	if so.OnYield != nil {
		ro.OnYield = func(took time.Duration) { so.OnYield(j.Name, took) }
	}
	srs, err := db.RunStream(ctx, j, opts, ro)
	if err == nil {
		err = convErr
	}
	if !so.Follow {
		if err != nil || len(srs) == 0 {
			return nil, err
		}
		sr := srs[len(srs)-1]
		if sr.Run != nil {
			return resultOf(sr.Run)
		}
		return &Result{Job: sr.Job, Decision: Decision(sr.Decision), Changed: []string{}, JobKey: sr.JobKey, Snapshot: sr.Snapshot,
			BatchID: sr.BatchID, RowsIn: sr.RowsIn, Outcomes: sr.Outcomes}, nil
	}
	res := &Result{Job: j.Name, Decision: DecisionSkipped, Changed: []string{}, Runs: []*Result{}}
	for _, sr := range srs {
		if sr.Run == nil {
			continue
		}
		r, cerr := resultOf(sr.Run)
		if cerr != nil {
			return nil, cerr
		}
		res.Runs = append(res.Runs, r)
		res.Snapshot, res.JobKey = r.Snapshot, r.JobKey
		if r.Decision.Committed() {
			res.Decision = DecisionApplied
		}
	}
	if err != nil && len(res.Runs) == 0 {
		return nil, err
	}
	return res, err
}
