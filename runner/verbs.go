package runner

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/idem-dev/idem/internal/export"
	"github.com/idem-dev/idem/internal/history"
	"github.com/idem-dev/idem/internal/inspect"
	"github.com/idem-dev/idem/internal/job"
	"github.com/idem-dev/idem/internal/run"
	"github.com/idem-dev/idem/internal/storage"
)

// Log returns job name's runs, newest first, as idem log prints them:
// every invocation of a run (skipped, already_committed, refused and
// failed ones too) and every fence, erasure and rollback. The database is
// only read; a job that never ran has none (an empty slice).
func (p *Project) Log(ctx context.Context, name string) ([]LogEntry, error) {
	return read(ctx, p, name, func(j *job.Job, db *run.DB) ([]LogEntry, error) {
		entries, err := history.Log(ctx, db, j.Name)
		out := make([]LogEntry, len(entries))
		for i, e := range entries {
			out[i] = LogEntry{Time: e.Time, BatchID: e.BatchID, Decision: e.Decision, Changed: e.Changed, RowsIn: e.RowsIn,
				Outcomes: e.Outcomes, Snapshot: e.Snapshot, Cursor: e.Cursor, Epoch: e.Epoch, Message: e.Message, FirstLoad: e.FirstLoad}
		}
		return out, err
	})
}

// Show returns the release packet of snapshot (0: the latest) of job name,
// as idem show prints it: what the run that committed it wrote, per
// partition. For an erasure or a rollback, which write no packet, it is the
// packet of the run snapshot whose rows it holds, with Requested and
// RequestedKind naming the snapshot asked for. A whole target's sha256,
// bytes and distinct keys, which its run leaves to its readers, are
// computed here (a full read of the target, which WithProgress shows). The
// database is only read. Errors: an expired snapshot (ErrRefused), a
// snapshot committed before packets existed.
func (p *Project) Show(ctx context.Context, name string, snapshot int64) (*Packet, error) {
	return read(ctx, p, name, func(j *job.Job, db *run.DB) (*Packet, error) {
		shown, err := inspect.Show(ctx, db, j, snapshot, p.s.progress)
		if err != nil {
			return nil, err
		}
		var out Packet
		return &out, convert(shown, &out)
	})
}

// read calls f with job name and its database opened read-only, which it
// closes after: f's error is the job's.
func read[T any](ctx context.Context, p *Project, name string, f func(*job.Job, *run.DB) (T, error)) (T, error) {
	return readPinned(ctx, p, name, nil, f)
}

// Fence advances job name's writer epoch and returns the new one: runs,
// erasures, rollbacks and expiries given an older epoch are refused from
// then on. It commits in one transaction. A result returned beside an
// error is committed: the database failed to close after the commit (what
// it committed stands).
func (p *Project) Fence(ctx context.Context, name string) (*FenceResult, error) {
	j, db, err := p.open(ctx, name, false)
	if err != nil {
		return nil, err
	}
	epoch, err := history.Fence(ctx, db, j.Name)
	if err != nil {
		return nil, jobError(name, errors.Join(err, db.Close()))
	}
	return &FenceResult{Job: j.Name, Epoch: epoch}, p.closeWritten(name, db)
}

// closeWritten closes db, written to by a call on job name that committed:
// its error says the close failed, not the commit.
func (p *Project) closeWritten(name string, db *run.DB) error {
	if err := db.Close(); err != nil {
		return jobError(name, &CloseError{Path: db.Path(), Err: err})
	}
	return nil
}

// CloseError is the error of closing a database after a call committed to
// it: what the call committed stands (a commit the close could not
// checkpoint is in the database's WAL, replayed on its next open), and the
// result is returned beside it. The idem command exits 1.
type CloseError struct {
	Path string
	Err  error
}

func (e *CloseError) Error() string { return fmt.Sprintf("close database %s: %v", e.Path, e.Err) }

// Unwrap returns the cause.
func (e *CloseError) Unwrap() error { return e.Err }

// convert copies src into dst, a public type with the same JSON keys
// (TestResultsInStep keeps them in step).
func convert(src, dst any) error {
	// Unescaped, as the command prints JSON: a key carried as raw JSON
	// (parts) keeps its bytes.
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(src); err != nil {
		return fmt.Errorf("copy %T: %w", src, err)
	}
	if err := json.Unmarshal(b.Bytes(), dst); err != nil {
		return fmt.Errorf("copy %T: %w", src, err)
	}
	return nil
}

// Rollback makes job name's current rows those of snapshot opts.To and
// commits them as a new snapshot, in one transaction, as idem rollback
// does; the ledger, cursor and outcomes stay. Errors: rows of an erased key it would expose, a change of the target's columns
// it would cross, a guard of opts (ErrRefused); a To that is no snapshot. The AfterCommit hooks
// follow the commit. A result returned beside an error is committed (a
// *CloseError or an *AfterCommitError).
func (p *Project) Rollback(ctx context.Context, name string, opts RollbackOptions) (*RollbackResult, error) {
	return write(ctx, p, name, "rollback", false, func(j *job.Job, db *run.DB) (*RollbackResult, int64, error) {
		res, err := history.Rollback(ctx, db, j, opts.To, history.RollbackOptions{ExpectParent: opts.ExpectParent, Epoch: opts.Epoch, Fault: p.faultFor(db.Path())})
		if err != nil {
			return nil, 0, err
		}
		return &RollbackResult{Job: res.Job, To: res.To, Snapshot: res.Snapshot, Parent: res.Parent, RowsOut: res.RowsOut,
			Replica: (*ReplicaInfo)(res.Replica)}, res.Snapshot, nil
	})
}

// Expire expires job name's snapshots older than its newest opts.Keep, in
// one transaction, as idem expire does: their history rows, outcome rows,
// release packets, and the retained inputs and checkpoints no kept
// snapshot's rerun needs. A snapshot a downstream job holds is kept (the
// result's Pins). Errors: a guard (ErrRefused). The AfterCommit hooks
// follow, but not a DryRun, which only reads. A result returned beside an
// error is committed, as for Rollback.
func (p *Project) Expire(ctx context.Context, name string, opts ExpireOptions) (*ExpireResult, error) {
	return write(ctx, p, name, "expire", opts.DryRun, func(j *job.Job, db *run.DB) (*ExpireResult, int64, error) {
		res, err := history.Expire(ctx, db, j, history.ExpireOptions{Keep: opts.Keep, DryRun: opts.DryRun, Epoch: opts.Epoch, Fault: p.faultFor(db.Path())})
		if err != nil {
			return nil, 0, err
		}
		var out ExpireResult
		return &out, res.Latest, convert(res, &out)
	})
}

// write calls f with job name and its database opened for writing (only
// read with readOnly), closes it, and then, unless readOnly, calls the
// AfterCommit hooks with the snapshot f returns: a verb that commits.
func write[T any](ctx context.Context, p *Project, name, verb string, readOnly bool, f func(*job.Job, *run.DB) (T, int64, error)) (T, error) {
	var zero T
	j, db, err := p.open(ctx, name, readOnly)
	if err != nil {
		return zero, err
	}
	res, snapshot, err := f(j, db)
	if err != nil {
		return zero, jobError(name, errors.Join(err, db.Close()))
	}
	if readOnly {
		db.Close() // read-only: nothing to lose
		return res, nil
	}
	if err := p.closeWritten(name, db); err != nil {
		return res, err
	}
	return res, p.afterCommit(ctx, Commit{Job: j.Name, Verb: verb, Snapshot: snapshot, Committed: true})
}

// Audit runs SELECT * WHERE predicate over the partitioned Parquet export
// of job name in dir (Export with Format parquet and PartitionBy) and a
// full scan of it, with DuckDB's profiling, as idem show --audit does, and
// reports the files, row groups and bytes each read. The predicate is the
// caller's own SQL; the job's database is not opened.
func (p *Project) Audit(ctx context.Context, name, dir, predicate string) (*AuditResult, error) {
	j, err := p.job(name)
	if err != nil {
		return nil, err
	}
	res, err := export.Audit(ctx, j, dir, predicate)
	if err != nil {
		return nil, jobError(name, err)
	}
	return &AuditResult{Job: res.Job, Export: res.Export, Snapshot: res.Snapshot, PartitionBy: res.PartitionBy, Where: res.Where,
		Audit: ScanFigure(res.Audit), Full: ScanFigure(res.Full), ByteRatio: res.ByteRatio}, nil
}

// DU reports where job name's bytes go, as idem du does: its target,
// history, outcomes, tombstones, retained inputs and checkpoints, the
// database file's used and free blocks, and for each kept snapshot what
// expiring through it would free. The database is only read.
func (p *Project) DU(ctx context.Context, name string) (*DUResult, error) {
	return read(ctx, p, name, func(j *job.Job, db *run.DB) (*DUResult, error) {
		res, err := storage.DU(ctx, db, j)
		if err != nil {
			return nil, err
		}
		var out DUResult
		return &out, convert(res, &out)
	})
}
