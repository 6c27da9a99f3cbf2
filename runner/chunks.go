package runner

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"strconv"

	"github.com/idem-dev/idem/runner/catalog"

	"github.com/idem-dev/idem/runner/job"
)

// Chunked backfill: [input] chunk_rows = N, watermark = "<column>".
//
// A large input is applied in chunks ordered by the (integer) watermark
// column, each chunk its own batch, transaction and snapshot, with the
// chunk's upper watermark committed as the job's cursor. A chunk covers the
// watermark range (from, to], where from is the cursor (the start of the
// input for the job's first chunk) and to is the N-th smallest watermark
// above from: all the rows that share the boundary value go into the same
// chunk, so no value is split between two chunks or read twice, and a chunk
// holds at least N rows unless it is the last (more when values tie at the
// boundary). Rows whose watermark is NULL or not an integer go with the
// first chunk read from their input file, so every row is read exactly
// once. After a crash the next run resumes strictly after the last
// committed watermark. A later input file continues after the job's
// watermark: its rows at or below it are taken to be already read, as a
// watermark means. The bounds
// are read inside each chunk's transaction; memory is bounded by the chunk,
// not the input (a top-N over the watermark, then a filtered scan).

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

// chunkSpec is one chunk of a chunked run. to is found inside the run's
// transaction.
type chunkSpec struct {
	rows  int64
	from  *int64 // nil: the job's first chunk
	to    *int64
	input string // the input part of the key, set by name
	after bool   // a chunk of this invocation was applied before this one
}

// name sets the batch id and digest of a chunk: the chunk is determined by
// the input, its start and the chunk size.
func (c *chunkSpec) name(p *prepared, files []InputFile) {
	start := "start"
	if c.from != nil {
		start = strconv.FormatInt(*c.from, 10)
	}
	c.input = p.parts.Input
	p.batchID = filepath.Base(files[0].Path) + "@" + start
	p.digest = job.DigestString(string(job.CanonicalJSON(map[string]any{
		"input": p.parts.Input, "from": start, "rows": c.rows,
	})))
}

// bounds are the ledger's from and to of a run: --from/--to, or a chunk's
// watermark range.
func (o RunOptions) bounds() (from, to any) {
	if o.chunk != nil {
		if o.chunk.from != nil {
			from = *o.chunk.from
		}
		if o.chunk.to != nil {
			to = *o.chunk.to
		}
		return from, to
	}
	if o.From != nil {
		from, to = *o.From, *o.To
	}
	return from, to
}

// RunChunks runs a chunked job until its input holds nothing past the
// job's watermark. It returns the chunks applied before an error together
// with the error. Every invocation is in the run log: each chunk as its
// run, the final look past the watermark only when it is all the
// invocation did (skipped), and an error before the first chunk as one
// entry.
func (d *DB) RunChunks(ctx context.Context, j *job.Job, opts RunOptions) (*ChunksResult, error) {
	if j.Input.ChunkRows < 1 {
		return nil, job.Usage("job %s is not chunked (set [input] chunk_rows and watermark)", j.Name)
	}
	if opts.BatchID != "" || opts.From != nil {
		return nil, d.logError(j, "", job.Usage("a chunked job names its batches after its watermark: --batch-id, --from and --to do not apply"))
	}
	files, err := resolveJobInput(ctx, j, opts.Input, opts.Progress)
	if err != nil {
		return nil, d.logError(j, "", job.Canceled(ctx, err))
	}
	out := &ChunksResult{Job: j.Name, Decision: job.DecisionSkipped, Runs: []*Result{}}
	for n := 1; ; n++ {
		started, cursor, err := catalog.ChunkStart(ctx, d.sql, j.Name)
		if err != nil {
			return out, d.logError(j, "", err)
		}
		spec := &chunkSpec{rows: j.Input.ChunkRows, after: n > 1}
		if started {
			spec.from = &cursor
			out.Watermark = &cursor
		}
		fault(opts, fmt.Sprintf("%s%d", FaultBeforeChunk, n))
		o := opts
		o.files = files
		o.chunk = spec
		res, err := d.Run(ctx, j, o)
		if err != nil {
			return out, err
		}
		if res.Decision != job.DecisionApplied {
			return out, nil
		}
		out.Decision = job.DecisionApplied
		out.Runs = append(out.Runs, res)
		if spec.to != nil {
			out.Watermark = spec.to
		}
	}
}

// checkChunk refuses a chunk that does not start where the job's last
// chunk ended (read inside the run's transaction).
func checkChunk(ctx context.Context, tx *sql.Tx, j *job.Job, st catalog.State, c *chunkSpec) error {
	started, cursor, err := catalog.ChunkStart(ctx, tx, j.Name)
	if err != nil {
		return err
	}
	switch {
	case started && c.from == nil:
		return job.Refuse("cursor", "job %s has committed chunks up to watermark %d: a chunk from the start would read rows twice", j.Name, cursor)
	case !started && c.from != nil:
		return job.Refuse("cursor", "job %s has no committed chunk: the first chunk starts at the start of the input", j.Name)
	case started && *c.from != cursor:
		return job.Refuse("cursor", "chunk starts after watermark %d but the job's watermark is %d", *c.from, cursor)
	}
	return nil
}

// filterChunk narrows the input view to the chunk: it finds the chunk's
// upper watermark and replaces view input with the rows in (from, to], plus
// the rows without a watermark in the first chunk. It reports false when
// there is nothing to apply: no row past the job's watermark.
func filterChunk(ctx context.Context, tx *sql.Tx, j *job.Job, c *chunkSpec) (bool, error) {
	if c == nil {
		return true, nil
	}
	w := "TRY_CAST(" + job.QuoteIdent(j.Input.Watermark) + " AS BIGINT)"
	if _, err := tx.ExecContext(ctx, `ALTER VIEW input RENAME TO idem_input_all`); err != nil {
		return false, fmt.Errorf("chunk input: %w", err)
	}
	var from any
	if c.from != nil {
		from = *c.from
	}
	if _, err := tx.ExecContext(ctx, "SET VARIABLE idem_chunk_from = CAST(? AS BIGINT)", from); err != nil {
		return false, fmt.Errorf("bind idem_chunk_from: %w", err)
	}
	var to sql.NullInt64
	err := tx.QueryRowContext(ctx, `SELECT max(w) FROM (
		SELECT `+w+` AS w FROM idem_input_all
		WHERE `+w+` > getvariable('idem_chunk_from') OR getvariable('idem_chunk_from') IS NULL
		ORDER BY w LIMIT ?)`, c.rows).Scan(&to)
	if err != nil {
		return false, fmt.Errorf("find the end of the chunk after watermark %v: %w", from, catalog.TrimSQLError(err))
	}
	// Rows without a watermark come with the first chunk read from this
	// input.
	var nulls int64
	read, err := catalog.ReadInput(ctx, tx, j.Name, c.input)
	if err != nil {
		return false, err
	}
	if !read {
		if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM idem_input_all WHERE `+w+` IS NULL`).Scan(&nulls); err != nil {
			return false, fmt.Errorf("count rows without a watermark: %w", catalog.TrimSQLError(err))
		}
	}
	if !to.Valid && c.from != nil && nulls == 0 {
		return false, nil
	}
	if to.Valid {
		c.to = &to.Int64
	}
	if _, err := tx.ExecContext(ctx, "SET VARIABLE idem_chunk_to = CAST(? AS BIGINT)", nullInt(to)); err != nil {
		return false, fmt.Errorf("bind idem_chunk_to: %w", err)
	}
	if _, err := tx.ExecContext(ctx, "SET VARIABLE idem_chunk_first = ?", nulls > 0); err != nil {
		return false, fmt.Errorf("bind idem_chunk_first: %w", err)
	}
	// The first chunk of an empty input still commits, so that the job
	// records that it has started.
	_, err = tx.ExecContext(ctx, `CREATE OR REPLACE TEMP VIEW input AS SELECT * FROM idem_input_all
		WHERE (`+w+` > getvariable('idem_chunk_from') OR getvariable('idem_chunk_from') IS NULL) AND `+w+` <= getvariable('idem_chunk_to')
		   OR getvariable('idem_chunk_first') AND `+w+` IS NULL`)
	if err != nil {
		return false, fmt.Errorf("chunk input: %w", err)
	}
	return true, nil
}

func nullInt(n sql.NullInt64) any {
	if n.Valid {
		return n.Int64
	}
	return nil
}
