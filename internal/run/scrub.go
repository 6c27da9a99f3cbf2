package run

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"

	"github.com/idem-dev/idem/internal/catalog"
	"github.com/idem-dev/idem/internal/job"
	"github.com/idem-dev/idem/internal/source"
)

// scrubErased rewrites the retained inputs of a run whose steps dropped rows
// as erased, without those rows, so that replaying an old raw batch does not
// store an erased subject's payload again. The snapshot row then names the
// rewritten files; the batch keeps its digest (the ledger's identity of the
// batch as received). The raw copies no snapshot refers to are listed in
// p.scrubbed, to be deleted after the commit.
func (d *DB) scrubErased(ctx context.Context, tx *sql.Tx, j *job.Job, p *Prepared, outcomes map[string]int64) error {
	if outcomes["erased"] == 0 || len(j.Pipeline.Key) != 1 || j.Pipeline.Position == "" {
		return nil
	}
	rows, err := tx.QueryContext(ctx, `SELECT key, position FROM idem_erased WHERE position IS NOT NULL`)
	if err != nil {
		return fmt.Errorf("read erasures of %s: %w", j.Name, err)
	}
	erased := map[string]int64{}
	for rows.Next() {
		var k string
		var pos int64
		if err := rows.Scan(&k, &pos); err != nil {
			rows.Close()
			return err
		}
		erased[k] = pos
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	keyCol, posCol := j.Pipeline.Key[0], j.Pipeline.Position
	flt := source.RowFilter{
		KeyCol: keyCol, PosCol: posCol,
		Drop: func(k string, pos sql.NullInt64) bool {
			e, ok := erased[k]
			return ok && pos.Valid && pos.Int64 <= e
		},
		DropSQL: "EXISTS (SELECT 1 FROM idem_erased AS e WHERE e.key = CAST(" + job.QuoteIdent(keyCol) + " AS VARCHAR) AND " + source.PositionSQL("CAST("+job.QuoteIdent(posCol)+" AS VARCHAR)") + " <= e.position)",
	}
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
		f.SHA256, f.Size, f.Retained = rw.New, rw.Bytes, source.RetainedPath(d.path, rw.New)
	}
	return nil
}
