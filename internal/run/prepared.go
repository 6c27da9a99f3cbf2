package run

import (
	"context"
	"database/sql"

	"github.com/idem-dev/idem/internal/job"
	"github.com/idem-dev/idem/internal/jobkey"
)

// Key is the job key of the prepared run.
func (p *Prepared) Key() string { return p.key }

// BatchID is the batch id of the prepared run ("" for a refresh).
func (p *Prepared) BatchID() string { return p.batchID }

// Parts are the four parts of the prepared run's job key.
func (p *Prepared) Parts() jobkey.Parts { return p.parts }

// Decide runs the guards of a run of p inside tx as a plan does: it claims
// no table and records no released version, and the caller rolls tx back.
// done is true when the run would write nothing (skipped, already
// committed). noBatch skips the batch identity guard: chunk batch ids are
// named from the staged rows.
func (d *DB) Decide(ctx context.Context, tx *sql.Tx, j *job.Job, p *Prepared, opts RunOptions, noBatch bool) (res *Result, done bool, err error) {
	if noBatch {
		q := *p
		q.batchID = ""
		p = &q
	}
	res, _, _, done, err = d.decide(ctx, tx, j, p, opts, false, false, nil)
	return res, done, err
}
