package run

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"time"

	"github.com/idem-dev/idem/internal/catalog"
	"github.com/idem-dev/idem/internal/job"
	"github.com/idem-dev/idem/internal/report"
	"github.com/idem-dev/idem/internal/source"
)

// A job with [input] kind = "kafka" or "sse" reads a stream. Each run reads
// one batch past the positions committed in idem.positions and applies it
// like a files batch (retained, so rerun replays it) whose id names the
// ranges read; its new positions commit in the same transaction as its
// rows. Follow runs batch after batch.

// StreamOptions are the settings of a run of a stream job.
type StreamOptions struct {
	// Reader reads the stream; nil opens the job's own (source.OpenStream).
	Reader source.StreamReader
	// AllowGap accepts records the source lost (retention) and logs the
	// gap; without it a gap is refused (*source.GapError, exit 3).
	AllowGap bool
	// Follow keeps reading batches until ctx ends, MaxBatches batches
	// committed (> 0), or IdleExit passed without a record (> 0).
	Follow     bool
	MaxBatches int
	IdleExit   time.Duration
	// OnBatch is called after each batch committed, and after each empty
	// read of a run that does not follow.
	OnBatch func(*StreamResult)
	// OnYield is called after a follow run let another command that
	// waited for the database have it (DB.Yield), with how long it was
	// let go.
	OnYield func(time.Duration)
}

// StreamResult is what one batch of a stream job reports.
type StreamResult struct {
	Job string `json:"job"`
	// Decision is applied, already_committed or skipped (nothing past the
	// committed positions: nothing written).
	Decision string               `json:"decision"`
	BatchID  string               `json:"batch_id"`
	Snapshot int64                `json:"snapshot"`
	Records  int                  `json:"records"`
	Replayed int                  `json:"replayed"`
	Ranges   []source.StreamRange `json:"ranges"`
	RowsIn   int64                `json:"rows_in"`
	Outcomes map[string]int64     `json:"outcomes"`
	// Positions are the committed next positions after the batch, per
	// partition; Lag how many records each partition's log holds past
	// them, when the reader knows its ends.
	Positions     map[string]int64 `json:"positions"`
	Lag           map[string]int64 `json:"lag,omitempty"`
	RecordsPerSec float64          `json:"records_per_sec"`
	Gap           string           `json:"gap,omitempty"`
	// Rejected are the records read as an invalid_* outcome (not one
	// record the pipeline can read), each naming partition and position.
	Rejected []catalog.Reject `json:"rejected,omitempty"`
	// Deletes counts the Kafka tombstones read as a delete row (the
	// pipeline's delete marker added to the message key).
	Deletes int    `json:"deletes,omitempty"`
	JobKey  string `json:"job_key"`
	// Run is the committed run's full result; nil when nothing was.
	Run *Result `json:"-"`
}

// RunStream runs stream job j: one batch, or with Follow batch after batch.
// A follow run stops without error when ctx ends (the batch in flight
// rolls back whole), after MaxBatches, or after IdleExit without records.
// It returns the results of the batches it ran; an error stops it.
func (d *DB) RunStream(ctx context.Context, j *job.Job, opts RunOptions, so StreamOptions) ([]*StreamResult, error) {
	if !j.IsStream() {
		return nil, report.Usage("job %s reads no stream ([input] kind = \"kafka\" or \"sse\")", j.Name)
	}
	if opts.Input != "" || opts.BatchID != "" || opts.From != nil || opts.Partitions != nil {
		return nil, d.logError(j, "", report.Usage("a stream job reads its %s from the committed positions and names its batches after the ranges read: --input, --batch-id, --from/--to and --partitions do not apply", j.Input.Stream.Kind))
	}
	r := so.Reader
	if r == nil {
		var err error
		if r, err = source.OpenStream(j); err != nil {
			return nil, d.logError(j, "", err)
		}
		defer r.Close()
	}
	var out []*StreamResult
	idleSince := time.Now()
	// known is the job's committed stream state as the follower's last
	// batch left it (source.Committed); nil reads it from the database.
	var known *source.Committed
	// ahead is the next batch, read while the last was applied (readAhead).
	var ahead *readAhead
	defer func() { ahead.drop() }()
	_, kafka := r.(*source.KafkaReader)
	for {
		if so.Follow && ctx.Err() != nil {
			return out, nil
		}
		// The last batch a follower may run is not read ahead of, nor a
		// batch an expiry follows: its sweep of the store would take the
		// file of the batch read ahead.
		readNext := so.Follow && kafka && (so.MaxBatches <= 0 || len(out)+1 < so.MaxBatches) &&
			(opts.Expire == nil || j.Retention.KeepSnapshots <= 0)
		sr, after, next, err := d.streamBatch(ctx, j, opts, r, so.AllowGap, !so.Follow, known, ahead, readNext)
		known, ahead = after, next
		if err != nil {
			if so.Follow && ctx.Err() != nil && errors.Is(err, report.ErrCanceled) {
				return out, nil // stopped: the batch in flight rolled back whole
			}
			return out, err
		}
		if sr.Decision != report.DecisionSkipped || !so.Follow {
			out = append(out, sr)
			if so.OnBatch != nil {
				so.OnBatch(sr)
			}
		}
		if !so.Follow {
			return out, nil
		}
		if d.settleFollower(sr.Records == 0) {
			// A failed checkpoint leaves the commits in the WAL, committed;
			// the next settle or the close tries again.
			_ = d.Settle(context.WithoutCancel(ctx))
		}
		if st, ok := r.(source.StreamStopper); ok && sr.Records == 0 && st.Stopped() {
			return out, nil // the source said it has nothing more
		}
		if sr.Records > 0 {
			idleSince = time.Now()
		} else if so.IdleExit > 0 && time.Since(idleSince) >= so.IdleExit {
			return out, nil
		}
		if so.MaxBatches > 0 && len(out) >= so.MaxBatches {
			return out, nil
		}
		// Between batches, a command waiting for the database (erase,
		// expire, compact, backup with --wait) has it.
		if took, err := d.Yield(ctx); err != nil {
			if ctx.Err() != nil {
				return out, nil
			}
			return out, fmt.Errorf("follow %s: open the database again after letting another command have it: %w", j.Name, err)
		} else if took > 0 {
			// Another command had the database: read the state again.
			known = nil
			if so.OnYield != nil {
				so.OnYield(took)
			}
		}
	}
}

// settleFollower reports whether a follow run settles its commits now: a
// read found no record (idle: the checkpoint costs no batch any time),
// or the oldest commit left in the WAL is followSettleAfter old. Between
// those, the commits stay in the WAL (or DuckDB checkpoints them at its
// threshold) and are settled when the follower closes.
func (d *DB) settleFollower(idle bool) bool {
	return d.unsettled > 0 && (idle || time.Since(d.since) >= followSettleAfter)
}

// streamBatch reads and applies one batch, from the committed stream
// state known (nil: read from the database). An empty read writes
// nothing; logEmpty records it in the run log (a single run, not each idle
// poll of a follow run). after is the committed stream state once it
// returns, when it is known without reading it: the batch's own after a
// commit, the one read from after an empty read; nil otherwise.
//
// pre is the batch read ahead while the last one was applied: it is this
// batch when it was read from known, and is dropped otherwise. With
// readNext, a batch that holds records starts reading the next one from
// the state its commit will leave (next) while it is applied.
func (d *DB) streamBatch(ctx context.Context, j *job.Job, opts RunOptions, r source.StreamReader, allowGap, logEmpty bool, known *source.Committed, pre *readAhead, readNext bool) (sr *StreamResult, after *source.Committed, next *readAhead, err error) {
	sr, b, assumed, next, err := d.streamBatchRun(ctx, j, opts, r, allowGap, logEmpty, known, pre, readNext)
	if err != nil || b == nil {
		return sr, nil, next, err
	}
	switch {
	case sr.Decision == report.DecisionSkipped:
		return sr, b.Before(), next, nil
	case sr.Decision == report.DecisionApplied && (sr.Run == nil || sr.Run.Expiry == nil || sr.Run.Expiry.Expired == 0):
		// An expiry may have deleted the snapshots that recorded the
		// first identity: read it again then.
		return sr, assumed, next, nil
	}
	return sr, nil, next, nil
}

// readAhead is a follower's next batch, read from the Kafka topic while the
// batch before it is applied (the read, its records' checks and its file
// take about a fifth of a 10,000-record batch's time, on another core). It
// is read from the positions the batch before it commits (from); when that
// batch does not commit, or another command has had the database since,
// it is dropped, and the next batch is read as usual. A batch read ahead is
// committed like any other: its transaction checks the positions it was
// read from (Stream.Stage), and a kill leaves no more than its file in the
// store, which the next open sweeps.
type readAhead struct {
	from *source.Committed
	done chan struct{}
	b    *source.StreamBatch
	ends map[string]int64
	err  error
}

func startAhead(ctx context.Context, q catalog.Querier, j *job.Job, r source.StreamReader, dir string, allowGap bool, from *source.Committed) *readAhead {
	a := &readAhead{from: from, done: make(chan struct{})}
	go func() {
		defer close(a.done)
		a.b, a.err = source.ReadStreamBatchKnown(ctx, q, j, r, dir, allowGap, from)
		a.ends = readerEnds(ctx, r)
	}()
	return a
}

// drop waits for the read to end and removes its file.
func (a *readAhead) drop() {
	if a == nil {
		return
	}
	<-a.done
	a.b.Remove()
}

func (d *DB) streamBatchRun(ctx context.Context, j *job.Job, opts RunOptions, r source.StreamReader, allowGap, logEmpty bool, known *source.Committed, pre *readAhead, readNext bool) (sr *StreamResult, b *source.StreamBatch, assumed *source.Committed, next *readAhead, err error) {
	start := time.Now()
	var ends map[string]int64
	if pre != nil && known != nil && pre.from == known {
		<-pre.done
		b, ends, err = pre.b, pre.ends, pre.err
	} else {
		pre.drop()
		doneRead := opts.Progress.Start("read batch")
		b, err = source.ReadStreamBatchKnown(ctx, d.sql, j, r, source.StreamDir(d.path), allowGap, known)
		doneRead()
		ends = readerEnds(ctx, r)
	}
	if err != nil {
		return nil, nil, nil, nil, d.logError(j, "", report.Canceled(ctx, err))
	}
	defer b.Remove()
	sr = &StreamResult{Job: j.Name, BatchID: b.ID, Records: b.Records, Replayed: b.Skipped, Ranges: b.Ranges,
		Outcomes: map[string]int64{}, Gap: source.GapNote(b.Gaps), Rejected: b.Rejects, Deletes: b.Deletes}
	if sr.Ranges == nil {
		sr.Ranges = []source.StreamRange{}
	}
	if b.Records == 0 && len(b.Gaps) == 0 && len(b.Pinned) == 0 && b.Reset == "" {
		sr.Decision = report.DecisionSkipped
		sr.BatchID = ""
		if logEmpty {
			if err := d.logInvocation(j, "", report.DecisionSkipped, "nothing new past the committed stream positions"); err != nil {
				return nil, nil, nil, next, err
			}
		}
		sr.Positions = b.From
		sr.Lag = lag(ends, b.From)
		if st, err := catalog.ReadState(ctx, d.sql, j.Name); err == nil {
			sr.Snapshot, sr.JobKey = st.Snapshot, st.Key
		}
		return sr, b, nil, nil, nil
	}
	if b.Records == 0 {
		// Only a gap, or partitions started where nothing was read yet:
		// commit their positions with an empty batch, so the gap is logged
		// once and the positions move past it, and what is produced after
		// a start at the log end is read by the next run.
		if err := b.WriteEmpty(source.StreamDir(d.path)); err != nil {
			return nil, nil, nil, next, err
		}
	}
	o := opts
	o.Source = &source.Stream{Job: j, Batch: b}
	o.BatchID = b.ID
	o.Note = sr.Gap
	if len(b.Pinned) > 0 {
		o.Note = strings.TrimPrefix(o.Note+"; "+pinnedNote(b), "; ")
	}
	if b.Reset != "" {
		o.Note = strings.TrimPrefix(o.Note+"; "+b.Reset, "; ")
		sr.Gap = strings.TrimPrefix(sr.Gap+"; "+b.Reset, "; ")
	}
	if n := RejectNote(b.Rejects); n != "" {
		o.Note = strings.TrimPrefix(o.Note+"; "+n, "; ")
	}
	assumed = b.After()
	if readNext && b.Records > 0 {
		next = startAhead(ctx, d.sql, j, r, source.StreamDir(d.path), allowGap, assumed)
	}
	res, err := d.Run(ctx, j, o)
	if err != nil {
		return nil, nil, nil, next, err
	}
	sr.Decision, sr.Snapshot, sr.RowsIn, sr.Outcomes, sr.JobKey, sr.Run = res.Decision, res.Snapshot, res.RowsIn, res.Outcomes, res.JobKey, res
	sr.Positions = maps.Clone(b.From)
	maps.Copy(sr.Positions, b.Next)
	sr.Lag = lag(ends, sr.Positions)
	if el := time.Since(start).Seconds(); el > 0 {
		sr.RecordsPerSec = float64(b.Records) / el
	}
	return sr, b, assumed, next, nil
}

// pinnedNote is how the run log records partitions a batch started
// without reading from them.
func pinnedNote(b *source.StreamBatch) string {
	parts := make([]string, len(b.Pinned))
	for i, p := range b.Pinned {
		parts[i] = fmt.Sprintf("partition %s at %d", p, b.Next[p])
	}
	return "positions pinned where the stream starts: " + strings.Join(parts, ", ")
}

// readerEnds are the reader's known log ends (nil when it knows none), as
// its last read left them.
func readerEnds(ctx context.Context, r source.StreamReader) map[string]int64 {
	e, ok := r.(source.StreamEnds)
	if !ok {
		return nil
	}
	return e.Ends(ctx)
}

// lag is, per partition, how far the reader's known log ends are past the
// positions; nil when the reader does not know its ends.
func lag(ends, pos map[string]int64) map[string]int64 {
	if len(ends) == 0 {
		return nil
	}
	out := map[string]int64{}
	for p, end := range ends {
		n := end - pos[p]
		if n < 0 {
			n = 0
		}
		out[p] = n
	}
	return out
}

// RejectNote is how the run log records a batch's rejects: "rejected 2
// records: 0:17 invalid_json, 0:18 invalid_utf8" (the first 20 named).
func RejectNote(rejects []catalog.Reject) string {
	var bad []catalog.Reject
	skipped := 0
	for _, r := range rejects {
		if r.Outcome == source.RejectSkippedEvent {
			skipped++
			continue
		}
		bad = append(bad, r)
	}
	var notes []string
	if len(bad) > 0 {
		var parts []string
		for i, r := range bad {
			if i == 20 {
				parts = append(parts, fmt.Sprintf("and %d more", len(bad)-i))
				break
			}
			part := fmt.Sprintf("%s:%d %s", r.Partition, r.Position, r.Outcome)
			if r.Why != "" {
				part += " (" + r.Why + ")"
			}
			parts = append(parts, part)
		}
		notes = append(notes, fmt.Sprintf("rejected %d record(s): %s", len(bad), strings.Join(parts, ", ")))
	}
	if skipped > 0 {
		notes = append(notes, fmt.Sprintf("passed over %d event(s) of a type [input] events does not select (outcome skipped_event)", skipped))
	}
	return strings.Join(notes, "; ")
}
