package source

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"strconv"

	"github.com/idem-dev/idem/internal/catalog"
	"github.com/idem-dev/idem/internal/job"
	"github.com/idem-dev/idem/internal/jobkey"
	"github.com/idem-dev/idem/internal/pipeline"
	"github.com/idem-dev/idem/internal/report"
	"github.com/idem-dev/idem/internal/sqltext"
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

// Chunk is one chunk of a chunked run. to is found inside the run's
// transaction.
type Chunk struct {
	Rows  int64
	From  *int64 // nil: the job's first chunk
	To    *int64
	Input string // the input part of the key, set by name
	After bool   // a chunk of this invocation was applied before this one
}

// Name returns the batch id and digest of a chunk: the chunk is determined by
// the input, its start and the chunk size.
func (c *Chunk) Name(input string, files []InputFile) (batchID, digest string) {
	start := "start"
	if c.From != nil {
		start = strconv.FormatInt(*c.From, 10)
	}
	c.Input = input
	batchID = filepath.Base(files[0].Path) + "@" + start
	digest = pipeline.DigestString(string(jobkey.CanonicalJSON(map[string]any{
		"input": input, "from": start, "rows": c.Rows,
	})))
	return batchID, digest
}

// CheckChunk refuses a chunk that does not start where the job's last
// chunk ended (read inside the run's transaction).
func CheckChunk(ctx context.Context, tx *sql.Tx, j *job.Job, st catalog.State, c *Chunk) error {
	started, cursor, err := catalog.ChunkStart(ctx, tx, j.Name)
	if err != nil {
		return err
	}
	switch {
	case started && c.From == nil:
		return report.Refuse("cursor", "job %s has committed chunks up to watermark %d: a chunk from the start would read rows twice", j.Name, cursor)
	case !started && c.From != nil:
		return report.Refuse("cursor", "job %s has no committed chunk: the first chunk starts at the start of the input", j.Name)
	case started && *c.From != cursor:
		return report.Refuse("cursor", "chunk starts after watermark %d but the job's watermark is %d", *c.From, cursor)
	}
	return nil
}

// filterChunk narrows the input view to the chunk: it finds the chunk's
// upper watermark and replaces view input with the rows in (from, to], plus
// the rows without a watermark in the first chunk. It reports false when
// there is nothing to apply: no row past the job's watermark.
func filterChunk(ctx context.Context, tx *sql.Tx, j *job.Job, c *Chunk) (bool, error) {
	if c == nil {
		return true, nil
	}
	w := "TRY_CAST(" + sqltext.QuoteIdent(j.Input.Watermark) + " AS BIGINT)"
	if _, err := tx.ExecContext(ctx, `ALTER VIEW input RENAME TO idem_input_all`); err != nil {
		return false, fmt.Errorf("chunk input: %w", err)
	}
	var from any
	if c.From != nil {
		from = *c.From
	}
	if _, err := tx.ExecContext(ctx, "SET VARIABLE idem_chunk_from = CAST(? AS BIGINT)", from); err != nil {
		return false, fmt.Errorf("bind idem_chunk_from: %w", err)
	}
	var to sql.NullInt64
	err := tx.QueryRowContext(ctx, `SELECT max(w) FROM (
		SELECT `+w+` AS w FROM idem_input_all
		WHERE `+w+` > getvariable('idem_chunk_from') OR getvariable('idem_chunk_from') IS NULL
		ORDER BY w LIMIT ?)`, c.Rows).Scan(&to)
	if err != nil {
		return false, fmt.Errorf("find the end of the chunk after watermark %v: %w", from, catalog.TrimSQLError(err))
	}
	// Rows without a watermark come with the first chunk read from this
	// input.
	var nulls int64
	read, err := catalog.ReadInput(ctx, tx, j.Name, c.Input)
	if err != nil {
		return false, err
	}
	if !read {
		if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM idem_input_all WHERE `+w+` IS NULL`).Scan(&nulls); err != nil {
			return false, fmt.Errorf("count rows without a watermark: %w", catalog.TrimSQLError(err))
		}
	}
	if !to.Valid && c.From != nil && nulls == 0 {
		return false, nil
	}
	if to.Valid {
		c.To = &to.Int64
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
