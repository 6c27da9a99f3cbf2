package run

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/idem-dev/idem/internal/catalog"
	"github.com/idem-dev/idem/internal/job"
	"github.com/idem-dev/idem/internal/pipeline"
	"github.com/idem-dev/idem/internal/report"
	"github.com/idem-dev/idem/internal/source"
)

// decide runs the guards of a run inside tx and returns the run's result
// so far: the job's state row, then epoch, table owners, the job's
// identity (pipeline and target), the target's integrity, key equality (refresh: skipped) or batch identity (apply:
// already committed), cursor, the input mode's files or chunk, the expected
// parent and the released SQL. done is true when the run has nothing to
// write. A run decides with write; a plan decides the same way without it,
// claiming no table and recording no released version, in a transaction it
// rolls back.
//
// learn collects the verdicts of a run that write kept only if it
// commits (guardLearn); nil for a plan. With head, decide stops once it
// knows whether the run has anything to write, before the guards only a
// writing run passes (and before it copies the upstreams' rows): a run
// that finds nothing to write has its whole answer then.
func (d *DB) decide(ctx context.Context, tx *sql.Tx, j *job.Job, p *Prepared, opts RunOptions, write, head bool, learn *guardLearn) (res *Result, st catalog.State, exists, done bool, err error) {
	// The verdicts committed runs kept, once per handle (verdicts.go).
	if err := d.guards.load(ctx, tx, d.verdictSecret); err != nil {
		return nil, st, false, false, err
	}
	st, upstates, err := readStates(ctx, tx, j, p.input)
	if err != nil {
		return nil, st, false, false, err
	}
	// A run on a handle without a threads setting runs on one thread when
	// its data is small (threads.go), before it reads any of it.
	if write {
		if err := d.fitThreads(ctx, tx, j, p); err != nil {
			return nil, st, false, false, err
		}
	}
	// Upstream inputs are pinned first: they complete the job key.
	pins, err := pin(ctx, tx, j, p, st, upstates, d.guards)
	if err != nil {
		return nil, st, false, false, err
	}
	res = newResult(j, p, st)
	res.Upstream = pins

	// Guards, in the order of the batch lab: epoch, identity, cursor; then the
	// expected parent.
	if err := st.CheckEpoch(j, opts.Epoch); err != nil {
		return nil, st, false, false, err
	}
	// Another job's table first, then this job's own pipeline and target.
	if err := d.checkOwners(ctx, tx, j, write, learn); err != nil {
		return nil, st, false, false, err
	}
	if err := st.CheckIdentity(j); err != nil {
		return nil, st, false, false, err
	}
	// One look at the catalog for both: listing tables costs about 8 us
	// a table of the database.
	var stored bool
	if err := tx.QueryRowContext(ctx, `SELECT count(*) FILTER (WHERE table_name = ?) > 0, count(*) FILTER (WHERE lower(table_name) = lower(?)) > 0
		FROM duckdb_tables() WHERE database_name = current_database() AND schema_name = 'main'`, j.Table, st.Target).Scan(&exists, &stored); err != nil {
		return nil, st, false, false, fmt.Errorf("look up table %s: %w", j.Table, err)
	}
	rows, counts, err := checkTarget(ctx, tx, j, st, stored)
	if err != nil {
		return nil, st, false, false, err
	}
	if res, done, err := d.decideMode(ctx, tx, j, p, opts, st, exists, rows, counts, res); err != nil || done {
		if err != nil && res == nil {
			return nil, st, false, false, err
		}
		return res, st, exists, true, err
	}
	// The run writes (or plans to): what it pinned is read from here on.
	if pinner, ok := p.input.(source.Pinner); ok {
		if err := pinner.Views(ctx, tx); err != nil {
			return nil, st, false, false, err
		}
	}
	if head {
		return res, st, exists, false, nil
	}
	// The upstreams' pinned rows, copied in canonical order only now that
	// the run writes (source.Upstream.Materialize), for steps whose result
	// may depend on the order rows arrive in. A model DuckDB's bound plan
	// proves order-free (ModelOrderFree) reads them through the views Pin
	// made over the upstreams' committed targets: inside this transaction
	// they hold the rows the copy would, and the job writes none of them
	// (its seal), so the copy and its sort bought nothing but CPU (the
	// project case's marts over orders: 60-75 ms each a nightly).
	if pinner, ok := p.input.(source.Pinner); ok {
		p.orderFree, err = modelOrderFree(ctx, tx, j, opts)
		if err != nil {
			return nil, st, false, false, err
		}
		if !p.orderFree {
			if err := pinner.Materialize(ctx, tx); err != nil {
				return nil, st, false, false, err
			}
		}
	}
	// A step reads only the job's own tables and its declared upstreams:
	// checked for a run that would write (a skipped run or a batch already
	// committed writes nothing, and its key names the SQL a run checked
	// before it committed).
	if err := checkSealed(ctx, tx, j, d.guards); err != nil {
		return nil, st, false, false, err
	}
	// A retry whose work already landed (skipped, already committed) is
	// answered above; only a run that would write checks its parent.
	if err := st.CheckParent(opts.ExpectParent); err != nil {
		return nil, st, false, false, err
	}
	if err := d.checkReleased(ctx, tx, j, write, learn); err != nil {
		return nil, st, false, false, err
	}
	return res, st, exists, false, nil
}

// newResult is a run's result before its guards: the job's key, input and
// state.
func newResult(j *job.Job, p *Prepared, st catalog.State) *Result {
	res := &Result{
		Job:         j.Name,
		Pipeline:    j.Pipeline.Name,
		Mode:        j.Pipeline.Mode,
		JobKey:      p.key,
		Target:      j.Table,
		InputSHA256: p.parts.Input,
		Inputs:      p.files,
		Parts:       p.parts,
		Snapshot:    st.Snapshot,
		Parent:      st.Snapshot,
		Cursor:      st.Cursor,
		Epoch:       st.Epoch,
		BatchID:     p.batchID,
		Outcomes:    map[string]int64{},
		Changed:     []string{},
	}
	if st.HasParts {
		res.Changed = report.NonNil(p.parts.Changed(st.Parts))
	} else {
		res.FirstLoad = true
	}
	return res
}

// checkOwners refuses a run that would write a table another job owns;
// a run claims its names. A plan may read a database from before
// idem.owners, which only a writable open creates. Names are never
// unclaimed (idem.owners only grows), so once a run of j committed with
// its names claimed, a run of the same names passes without asking
// (learned).
func (d *DB) checkOwners(ctx context.Context, tx *sql.Tx, j *job.Job, write bool, learn *guardLearn) error {
	// What catalog.CheckOwners derives the names from.
	parts := []string{j.Name, j.Table, j.Pipeline.OutcomesTable, j.DDL}
	for _, st := range j.Steps {
		parts = append(parts, st.SQL)
	}
	return d.learned("owners", guardKey("owners", parts...), write, learn, func() error {
		owners := write
		if !write {
			var err error
			if owners, err = catalog.TableExists(ctx, tx, "idem", "owners"); err != nil || !owners {
				return err
			}
		}
		return catalog.CheckOwners(ctx, tx, j, write)
	})
}

// checkReleased is catalog.CheckReleased, skipped when a run of the same
// released SQL (the job's release name, versions and their files' sha256,
// its model text) committed through this handle: idem.released and
// idem.model_texts only grow, so what that run checked and recorded is
// still there (learned).
func (d *DB) checkReleased(ctx context.Context, tx *sql.Tx, j *job.Job, write bool, learn *guardLearn) error {
	k := guardKey("released", j.Name, j.ReleaseName(), fmt.Sprint(j.TransformVersion, " ", j.SchemaVersion),
		fmt.Sprint(j.ContentVersioned(), j.IsModel()), pipeline.StepsDigest(j.Steps), pipeline.DigestString(j.DDL), j.TransformPart().SHA256, j.ModelSQL)
	return d.learned("released", k, write, learn, func() error { return catalog.CheckReleased(ctx, tx, j, write) })
}

// learned runs check unless a committed run kept its verdict under k; a
// run that writes and passes it has learn keep it once it commits.
func (d *DB) learned(kind string, k [32]byte, write bool, learn *guardLearn, check func() error) error {
	if _, ok := d.guards.get(k); ok {
		return nil
	}
	if err := check(); err != nil {
		return err
	}
	if write {
		learn.add(k, kind)
	}
	return nil
}

// decideMode is the guard of the job's mode: a refresh whose target holds
// this key is skipped; an apply batch committed before is answered from the
// ledger, and the cursor and input mode are checked. done is true when the
// run has nothing to write.
//
// rows is the target's row count when checkTarget counted it (-1 when
// not): a run with nothing to write reports it; counts, when not nil, is
// what the state's snapshot recorded, as checkTarget read it.
func (d *DB) decideMode(ctx context.Context, tx *sql.Tx, j *job.Job, p *Prepared, opts RunOptions, st catalog.State, exists bool, rows int64, counts *catalog.SnapshotCountsRow, res *Result) (*Result, bool, error) {
	var err error
	countRows := func() (int64, error) {
		if rows >= 0 {
			return rows, nil
		}
		return catalog.CountRows(ctx, tx, j.Table)
	}
	switch j.Pipeline.Mode {
	case pipeline.ModeRefresh:
		if st.Exists && st.Key == p.key && exists && !opts.FullRefresh {
			// The target already holds this snapshot: report its counts.
			res.Decision = report.DecisionSkipped
			if counts == nil {
				c, err := catalog.ReadSnapshotCounts(ctx, tx, j.Name, st.Snapshot)
				if err != nil {
					return nil, false, err
				}
				counts = &c
			}
			res.RowsIn = counts.RowsIn
			if err := json.Unmarshal([]byte(counts.Outcomes), &res.Outcomes); err != nil {
				return nil, false, fmt.Errorf("read outcomes of snapshot %d of %s: %w", st.Snapshot, j.Name, err)
			}
			res.RowsOut, err = countRows()
			return res, true, err
		}
	case pipeline.ModeApply:
		if p.unchanged {
			// No upstream moved since the snapshots the job applied.
			res.Decision = report.DecisionSkipped
			res.RowsOut, err = countRows()
			return res, true, err
		}
		if j.Input.Mode == job.InputModeReplace {
			// A reference table: the same content as the latest snapshot
			// (under any file name) changes nothing; other content is a
			// batch of its own, whatever was committed before it.
			if st.Exists && st.Key == p.key && exists && !opts.FullRefresh {
				res.Decision = report.DecisionSkipped
				res.RowsOut, err = countRows()
				return res, true, err
			}
			if opts.BatchID == "" {
				p.batchID = fmt.Sprintf("replace:%s@%d", p.parts.Input[:16], st.Snapshot)
				res.BatchID = p.batchID
			}
		}
		if done, err := d.checkLedger(ctx, tx, j, p, res, countRows); err != nil || done {
			return res, true, err
		}
		if opts.From != nil && *opts.From != st.Cursor {
			what := "a gap"
			if *opts.From < st.Cursor {
				what = "an overlap"
			}
			return nil, false, report.Refuse("cursor", "batch %s starts at %d but the job's cursor is %d (%s): the next batch must start at %d", p.batchID, *opts.From, st.Cursor, what, st.Cursor)
		}
		// Directory and chunked inputs (files.go, chunks.go).
		if err := checkInputMode(ctx, tx, j, p, st, opts); err != nil {
			return nil, false, err
		}
	}
	return res, false, nil
}

// checkTarget refuses a run when the job's state row says its target holds
// snapshot S but the table is missing or holds another number of rows than
// S recorded: the table was dropped or changed outside idem, and a skip, an
// already-committed answer or a batch applied over the wrong rows would hide
// it. The refusal says how to repair: a rollback to S rebuilds the table
// from its history. exists says whether the state's target table is in
// the database. It returns the rows it counted, -1 when it counted none,
// and the counts the snapshot recorded when it read them.
func checkTarget(ctx context.Context, tx catalog.Querier, j *job.Job, st catalog.State, exists bool) (int64, *catalog.SnapshotCountsRow, error) {
	if !st.Exists || st.Snapshot == 0 || !strings.EqualFold(st.Target, j.Table) {
		return -1, nil, nil
	}
	counts, err := catalog.ReadSnapshotCounts(ctx, tx, j.Name, st.Snapshot)
	if err != nil {
		return -1, nil, err
	}
	want := counts.RowsOut
	ref := j.File
	if ref == "" {
		ref = j.Name
	}
	repair := fmt.Sprintf("nothing was changed; repair with `idem rollback %s --to-snapshot %d` (rebuilds the table from its history), then `idem rerun %s` proves it", ref, st.Snapshot, ref)
	if !exists {
		return -1, nil, report.Refuse("target", "table %q of job %q is missing, but the job's state says it holds snapshot %d (%d rows): %s",
			st.Target, j.Name, st.Snapshot, want.Int64, repair)
	}
	if !want.Valid {
		return -1, &counts, nil
	}
	n, err := catalog.CountRows(ctx, tx, st.Target)
	if err != nil {
		return -1, nil, err
	}
	if n != want.Int64 {
		return -1, nil, report.Refuse("target", "table %q of job %q holds %d rows, but snapshot %d, which the job's state says it holds, has %d: it was changed outside idem; %s",
			st.Target, j.Name, n, st.Snapshot, want.Int64, repair)
	}
	return n, &counts, nil
}

// checkLedger applies the batch identity guard. It reports done when the
// batch was already committed with the same digest.
func (d *DB) checkLedger(ctx context.Context, tx *sql.Tx, j *job.Job, p *Prepared, res *Result, countRows func() (int64, error)) (bool, error) {
	row, ok, err := catalog.ReadLedger(ctx, tx, j.Name, p.batchID)
	if err != nil || !ok {
		return false, err
	}
	if row.Digest != p.digest {
		return false, report.Refuse("batch", "batch %s was committed with digest %s; this input's digest is %s: a changed batch needs a new batch id", p.batchID, row.Digest[:12], p.digest[:12])
	}
	res.Decision = report.DecisionAlreadyCommitted
	res.RowsIn = row.RowsIn
	res.Snapshot = row.Snapshot
	if err := json.Unmarshal([]byte(row.Outcomes), &res.Outcomes); err != nil {
		return false, fmt.Errorf("read outcomes of batch %s of %s: %w", p.batchID, j.Name, err)
	}
	rowsOut, err := countRows()
	if err == nil {
		res.RowsOut = rowsOut
	}
	return true, nil
}

// checkInputMode is the in-transaction guard of directory and chunked
// inputs: a file of the batch must not be committed already (the listing
// that chose it was read outside the transaction), and a chunk must start
// where the job's last chunk ended.
func checkInputMode(ctx context.Context, tx *sql.Tx, j *job.Job, p *Prepared, st catalog.State, opts RunOptions) error {
	if p.chunk != nil {
		return source.CheckChunk(ctx, tx, j, st, p.chunk)
	}
	if j.Input.Mode != job.InputModeFiles {
		return nil
	}
	return source.CheckFiles(ctx, tx, j, p.files)
}
