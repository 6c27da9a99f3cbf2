package run

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/idem-dev/idem/internal/catalog"
	"github.com/idem-dev/idem/internal/job"
	"github.com/idem-dev/idem/internal/pipeline"
	"github.com/idem-dev/idem/internal/source"
	"github.com/idem-dev/idem/internal/sqltext"
)

// scrubErased rewrites the retained inputs of a run whose steps dropped rows
// as erased, without those rows, so that replaying an old raw batch does not
// store an erased subject's payload again: the rows of a key at or below
// its erasure point for a pipeline with a position column, every row of an
// erased key or subject for a job the runner guards (erased.go). The
// snapshot row then names the rewritten files; the batch keeps its digest
// (the ledger's identity of the batch as received). The raw copies no
// snapshot refers to are listed in p.scrubbed, to be deleted after the
// commit.
func (d *DB) scrubErased(ctx context.Context, tx *sql.Tx, j *job.Job, p *Prepared, outcomes map[string]int64) error {
	if outcomes[erasedOutcome] == 0 {
		return nil
	}
	if err := blankErasedOutcomes(ctx, tx, j); err != nil {
		return err
	}
	var filters []source.RowFilter
	switch {
	case guardsErased(j):
		m, err := savedErasedMatch(ctx, tx)
		if err != nil {
			return err
		}
		filters = erasedFilters(m)
	case len(j.Pipeline.Key) == 1 && j.Pipeline.Position != "":
		flt, err := positionFilter(ctx, tx, j)
		if err != nil {
			return err
		}
		filters = []source.RowFilter{flt}
	}
	for _, flt := range filters {
		if err := d.rewriteInputs(ctx, tx, p, flt); err != nil {
			return err
		}
	}
	return nil
}

// blankErasedOutcomes sets to NULL every value (every nullable column but
// batch_id and outcome) of the run's erased rows in the pipeline's
// outcomes table: whatever its commit step stored of them (a key, say),
// the outcome row of an erased key or subject names nothing.
func blankErasedOutcomes(ctx context.Context, tx *sql.Tx, j *job.Job) error {
	if j.Pipeline.OutcomesTable == "" {
		return nil
	}
	table := j.Table + j.Pipeline.OutcomesTable
	cols, err := textColumn(ctx, tx, `SELECT column_name FROM duckdb_columns() WHERE database_name = current_database() AND schema_name = 'main'
		AND table_name = ? AND is_nullable AND column_name NOT IN ('batch_id', 'outcome') ORDER BY column_index`, table)
	if err != nil {
		return fmt.Errorf("columns of %s: %w", table, err)
	}
	if len(cols) == 0 {
		return nil
	}
	set := make([]string, len(cols))
	for i, c := range cols {
		set[i] = sqltext.QuoteIdent(c) + " = NULL"
	}
	where := "outcome = " + sqltext.SQLString(erasedOutcome)
	if j.Pipeline.Mode == pipeline.ModeApply {
		where += " AND batch_id = getvariable('idem_batch_id')"
	}
	if _, err := tx.ExecContext(ctx, "UPDATE "+sqltext.QuoteIdent(table)+" SET "+strings.Join(set, ", ")+" WHERE "+where); err != nil {
		return fmt.Errorf("blank the erased rows of %s: %w", table, catalog.TrimSQLError(err))
	}
	return nil
}

// positionFilter drops the rows of an erased key at or below its erasure
// point (idem_erased).
func positionFilter(ctx context.Context, tx *sql.Tx, j *job.Job) (source.RowFilter, error) {
	rows, err := tx.QueryContext(ctx, `SELECT key, position FROM idem_erased WHERE position IS NOT NULL`)
	if err != nil {
		return source.RowFilter{}, fmt.Errorf("read erasures of %s: %w", j.Name, err)
	}
	erased := map[string]int64{}
	for rows.Next() {
		var k string
		var pos int64
		if err := rows.Scan(&k, &pos); err != nil {
			rows.Close()
			return source.RowFilter{}, err
		}
		erased[k] = pos
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return source.RowFilter{}, err
	}
	keyCol, posCol := j.Pipeline.Key[0], j.Pipeline.Position
	return source.RowFilter{
		KeyCol: keyCol, PosCol: posCol,
		Drop: func(k string, pos sql.NullInt64) bool {
			e, ok := erased[k]
			return ok && pos.Valid && pos.Int64 <= e
		},
		DropSQL: "EXISTS (SELECT 1 FROM idem_erased AS e WHERE e.key = CAST(" + sqltext.QuoteIdent(keyCol) + " AS VARCHAR) AND " + source.PositionSQL("CAST("+sqltext.QuoteIdent(posCol)+" AS VARCHAR)") + " <= e.position)",
	}, nil
}

// rewriteInputs rewrites the run's retained inputs without the rows flt
// drops.
func (d *DB) rewriteInputs(ctx context.Context, tx *sql.Tx, p *Prepared, flt source.RowFilter) error {
	for i := range p.files {
		f := &p.files[i]
		rw, _, err := source.Rewrite(ctx, tx, d.path, catalog.InputRef{SHA256: f.SHA256, Bytes: f.Size, Name: filepath.Base(f.Path)}, p.format, flt)
		if err != nil {
			return err
		}
		if rw == nil {
			continue
		}
		if err := catalog.RecordInput(ctx, tx, rw.New, rw.Bytes); err != nil {
			return fmt.Errorf("record input %s: %w", f.Path, err)
		}
		refs, err := catalog.InputReferences(ctx, tx, f.SHA256)
		if err != nil {
			return fmt.Errorf("count references to input %s: %w", f.Path, err)
		}
		if refs == 0 {
			if err := catalog.ForgetInput(ctx, tx, f.SHA256); err != nil {
				return fmt.Errorf("forget input %s: %w", f.Path, err)
			}
			p.scrubbed = append(p.scrubbed, f.Retained)
		}
		if _, ok := p.received[f.Path]; !ok {
			if p.received == nil {
				p.received = map[string]source.InputFile{}
			}
			p.received[f.Path] = *f
		}
		f.SHA256, f.Size, f.Retained = rw.New, rw.Bytes, source.RetainedPath(d.path, rw.New)
	}
	return nil
}
