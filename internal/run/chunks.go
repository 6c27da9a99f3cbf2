package run

import (
	"context"
	"fmt"

	"github.com/idem-dev/idem/internal/catalog"
	"github.com/idem-dev/idem/internal/job"
	"github.com/idem-dev/idem/internal/report"
	"github.com/idem-dev/idem/internal/source"
)

// FaultBeforeChunk is the fault point passed before each chunk, followed by
// its number in this run (1, 2, ...).
const FaultBeforeChunk = "before_chunk:"

// ChunksResult is what a chunked run reports: one Result per chunk applied.
// Decision is "applied" when a chunk was applied and "skipped" when the
// input holds nothing past the job's watermark.
type ChunksResult struct {
	Job       string    `json:"job"`
	Decision  string    `json:"decision"`
	Watermark *int64    `json:"watermark"`
	Runs      []*Result `json:"runs"`
}

// RunChunks runs a chunked job until its input holds nothing past the
// job's watermark. It returns the chunks applied before an error together
// with the error. Every invocation is in the run log: each chunk as its
// run, the final look past the watermark only when it is all the
// invocation did (skipped), and an error before the first chunk as one
// entry.
func (d *DB) RunChunks(ctx context.Context, j *job.Job, opts RunOptions) (*ChunksResult, error) {
	if j.Input.ChunkRows < 1 {
		return nil, report.Usage("job %s is not chunked (set [input] chunk_rows and watermark)", j.Name)
	}
	if opts.BatchID != "" || opts.From != nil {
		return nil, d.logError(j, "", report.Usage("a chunked job names its batches after its watermark: --batch-id, --from and --to do not apply"))
	}
	files, err := source.ResolveJob(ctx, j, opts.Input, opts.Progress)
	if err != nil {
		return nil, d.logError(j, "", report.Canceled(ctx, err))
	}
	out := &ChunksResult{Job: j.Name, Decision: report.DecisionSkipped, Runs: []*Result{}}
	for n := 1; ; n++ {
		started, cursor, err := catalog.ChunkStart(ctx, d.sql, j.Name)
		if err != nil {
			return out, d.logError(j, "", err)
		}
		spec := &source.Chunk{Rows: j.Input.ChunkRows, After: n > 1}
		if started {
			spec.From = &cursor
			out.Watermark = &cursor
		}
		fault(opts, fmt.Sprintf("%s%d", FaultBeforeChunk, n))
		o := opts
		o.Source = &source.Files{Job: j, Listed: files, Chunk: spec}
		res, err := d.Run(ctx, j, o)
		if err != nil {
			return out, err
		}
		if res.Decision != report.DecisionApplied {
			return out, nil
		}
		out.Decision = report.DecisionApplied
		out.Runs = append(out.Runs, res)
		if spec.To != nil {
			out.Watermark = spec.To
		}
	}
}
