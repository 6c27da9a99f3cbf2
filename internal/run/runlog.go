package run

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/idem-dev/idem/internal/catalog"
	"github.com/idem-dev/idem/internal/job"
	"github.com/idem-dev/idem/internal/jobkey"
	"github.com/idem-dev/idem/internal/report"

	duckdb "github.com/duckdb/duckdb-go/v2"
)

// Every invocation of a run that opened the job's database is recorded in
// idem.runs, whatever the job's input mode: a commit in its own transaction
// (writeCommitRows), a refusal or failure after the rollback, in a short
// transaction of its own (logOutside, logInvocation), and a run that
// decided to write nothing (skipped, already_committed: logNoCommit) with
// the next write of the handle: the next commit's transaction, the next
// short one, or Close. A project run whose jobs are skipped so pays one
// transaction for their rows, not one each (issue 44); a process killed
// before that loses the rows of its skipped runs, which changed nothing.
// Rows are written in the order the runs decided, so idem.runs' rowid
// order stays the order of the runs, and each keeps the time its run
// decided (RunRow.At). A failure to record is returned with what the run
// reports (joined to its error), never dropped.
//
// The log holds no row values: it outlives erasures in every copy of the
// database (the file's free blocks until compact, the replica, backups), so
// a message that quoted a row would keep an erased subject. The message of
// a failed run is logMessage(err): an audit keeps its counts, a key check
// its count of bad keys, and an error of the engine (which may quote a
// value: a failed CAST, a duplicate key, a CSV line, a step's error())
// keeps idem's context and the engine's error type only. The whole text
// goes to stderr, where the caller prints it.

// logNoCommit records a run that decided to write nothing (skipped,
// already_committed) in the run log: the row is deferred, written with the
// handle's next commit or at Close (deferredLog). An already-committed batch is logged with what the run reported:
// the original batch's snapshot, rows in and outcome counts from the ledger.
// The last, empty chunk of a chunked run that applied chunks is not logged:
// the invocation is logged by its chunks.
func (d *DB) logNoCommit(j *job.Job, p *Prepared, res *Result, opts RunOptions) error {
	var message string
	if c := p.chunk; c != nil {
		if c.After {
			return nil
		}
		if c.From != nil {
			message = fmt.Sprintf("nothing past watermark %d", *c.From)
		}
	}
	// The job's snapshot, cursor and epoch as the decision read them in
	// its transaction (newResult): no connection and no query of its own.
	var rowsIn, outcomes any
	snapshot := res.Parent
	if res.Decision == report.DecisionAlreadyCommitted {
		rowsIn, outcomes, snapshot = res.RowsIn, string(jobkey.CanonicalJSON(res.Outcomes)), res.Snapshot
	}
	d.deferred.add(catalog.RunRow{Job: j.Name, BatchID: p.batchID, Decision: res.Decision,
		Changed: string(jobkey.CanonicalJSON(report.NonNil(res.Changed))), RowsIn: rowsIn, Outcomes: outcomes,
		Snapshot: snapshot, Cursor: res.Cursor, Epoch: res.Epoch, Message: message, At: time.Now()})
	return nil
}

// deferredLog holds the run log rows a handle has not written yet, and
// how many of them a commit's transaction, tx, has written. The jobs of a
// project run share a handle and run at once (projectrun), so every use
// holds mu: a run that logs outside the gate (a refusal before its
// transaction, a files-mode "nothing new") while another's commit has
// written the first rows writes only the rest.
type deferredLog struct {
	mu      sync.Mutex
	rows    []catalog.RunRow
	tx      *sql.Tx
	written int
}

// add defers r.
func (l *deferredLog) add(r catalog.RunRow) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.rows = append(l.rows, r)
}

// writeIn writes the deferred rows in tx, once per transaction; they
// stay deferred until committed says tx committed.
func (l *deferredLog) writeIn(ctx context.Context, tx *sql.Tx) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.tx == tx {
		return nil
	}
	l.tx, l.written = tx, 0
	if err := catalog.InsertRuns(ctx, tx, l.rows); err != nil {
		return fmt.Errorf("write run log: %w", err)
	}
	l.written = len(l.rows)
	return nil
}

// committed drops the rows tx wrote, once it has committed.
func (l *deferredLog) committed(tx *sql.Tx) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.tx == tx {
		l.rows = l.rows[l.written:]
	}
	l.tx, l.written = nil, 0
}

// pending reports whether rows wait to be written.
func (l *deferredLog) pending() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.rows) > 0
}

// insertRun appends the deferred rows and r (when not nil) to the run log
// in a short transaction of its own. Rows a commit's transaction still
// open has written stay with it (deferredLog.committed).
func insertRun(ctx context.Context, d *DB, r *catalog.RunRow) error {
	l := d.deferred
	l.mu.Lock()
	defer l.mu.Unlock()
	held := 0
	if l.tx != nil {
		held = l.written
	}
	rows := l.rows[held:]
	if r != nil {
		rows = append(rows[:len(rows):len(rows)], *r)
	}
	if len(rows) == 0 {
		return nil
	}
	tx, err := d.sql.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("write run log: %w", err)
	}
	if err := catalog.InsertRuns(ctx, tx, rows); err != nil {
		return errors.Join(fmt.Errorf("write run log: %w", err), tx.Rollback())
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("write run log: %w", err)
	}
	l.rows = l.rows[:held]
	return nil
}

// WriteDeferredLog writes the run log rows of runs that wrote nothing that
// the handle deferred (see above), so that a read of the run log on this
// handle sees them.
func (d *DB) WriteDeferredLog(ctx context.Context) error { return d.flushDeferred(ctx) }

// flushDeferred writes the run log rows the handle deferred, in one
// transaction (Close).
func (d *DB) flushDeferred(ctx context.Context) error {
	if d.readOnly || !d.deferred.pending() {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	return insertRun(ctx, d, nil)
}

// logInvocation records an invocation that never reached a run's
// transaction, or that a files-mode or chunked job decided outside one:
// "nothing new", a committed file that changed, an input that cannot be
// read. batchID may be empty.
// message must hold no row values (logMessage).
func (d *DB) logInvocation(j *job.Job, batchID, decision, message string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	st, err := catalog.ReadState(ctx, d.sql, j.Name)
	if err != nil {
		return fmt.Errorf("write run log: %w", err)
	}
	return insertRun(ctx, d, &catalog.RunRow{Job: j.Name, BatchID: batchID, Decision: decision, Changed: "[]",
		Snapshot: st.Snapshot, Cursor: st.Cursor, Epoch: st.Epoch, Message: message})
}

// logError records err as a refused or failed invocation and returns it,
// joined with the failure to record it if any.
func (d *DB) logError(j *job.Job, batchID string, err error) error {
	if err != nil && !d.readOnly {
		if lerr := d.logInvocation(j, batchID, errorDecision(err), logMessage(err)); lerr != nil {
			return errors.Join(err, lerr)
		}
	}
	return err
}

// LogMessager is an error whose text may hold row values: LogMessage is
// its text without them, what the run log keeps.
type LogMessager interface {
	error
	LogMessage() string
}

// logMessage is what the run log keeps of err: its text, with the text
// of every error of its tree that may hold row values replaced, a
// LogMessager's by its LogMessage and a DuckDB error's (which may quote
// values) by its error type. A text it cannot place is withheld whole.
func logMessage(err error) string {
	msg := err.Error()
	ok := true
	walkErrors(err, func(e error) bool {
		var text, safe string
		switch e := e.(type) {
		case LogMessager:
			text, safe = e.Error(), e.LogMessage()
		case *duckdb.Error:
			kind, _, found := strings.Cut(e.Msg, ": ")
			if !found || !strings.HasSuffix(kind, " Error") || strings.ContainsAny(kind, "'\"`") {
				kind = "DuckDB error"
			}
			text, safe = e.Msg, kind+" (withheld from the run log, which keeps no row values; printed when it happened)"
		default:
			return true
		}
		// The text may have been cut (catalog.TrimSQLError cuts it before
		// "LINE n:"): whole, cut so, or its first line.
		at, n := -1, 0
		cut, _, _ := strings.Cut(text, "\n\nLINE ")
		first, _, _ := strings.Cut(text, "\n")
		for _, t := range []string{text, strings.TrimSpace(cut), first} {
			if i := strings.Index(msg, t); t != "" && i >= 0 {
				at, n = i, len(t)
				break
			}
		}
		if at < 0 {
			ok = false
			return false
		}
		msg = msg[:at] + safe + msg[at+n:]
		return false // what it wraps is in its text
	})
	if !ok {
		return "the message is withheld from the run log, which keeps no row values; it was printed when it happened"
	}
	return msg
}

// walkErrors calls f for err and, while f returns true, for what it wraps
// (every branch of a joined error).
func walkErrors(err error, f func(error) bool) {
	if err == nil || !f(err) {
		return
	}
	switch u := err.(type) {
	case interface{ Unwrap() []error }:
		for _, e := range u.Unwrap() {
			walkErrors(e, f)
		}
	case interface{ Unwrap() error }:
		walkErrors(u.Unwrap(), f)
	}
}

// errorDecision is the run log's decision for a run that ended with err.
func errorDecision(err error) string {
	if errors.Is(err, report.ErrRefused) {
		return report.DecisionRefused
	}
	return report.DecisionFailed
}
