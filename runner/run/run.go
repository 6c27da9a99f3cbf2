package run

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/idem-dev/idem/runner/source"

	"github.com/idem-dev/idem/runner/catalog"

	"github.com/idem-dev/idem/runner/job"
)

// Fault points: a RunOptions.Fault hook is called with each name as the run
// passes it. The CLI uses them to kill itself in crash tests (see
// docs/reliability.md). FaultCheckpoint is called just before the
// post-commit CHECKPOINT starts and FaultAfterCheckpoint once it returned, so
// a hook can kill the process while the checkpoint runs.
const (
	FaultBeforeBegin     = "before_begin"
	FaultAfterStep       = "after_step:" // followed by the step file name
	FaultAfterTarget     = "after_target"
	FaultBeforeCommit    = "before_commit"
	FaultAfterCommit     = "after_commit"
	FaultCheckpoint      = "checkpoint"
	FaultAfterCheckpoint = "after_checkpoint"
)

// RunOptions are the per-invocation settings of a run; none is part of the
// job key.
type RunOptions struct {
	Input        string // overrides the job's [input] path
	BatchID      string // apply mode; default: the input file's base name
	From, To     *int64 // apply mode: the batch covers source positions (From, To]
	Epoch        *int64 // refuse unless this is the job's writer epoch
	ExpectParent *int64 // refuse unless the job's latest snapshot is this
	Fault        func(point string)
	Progress     job.Progress
	// FailAfterTarget injects an error after the target is written and
	// before COMMIT (tests of the all-or-nothing commit).
	FailAfterTarget bool

	// Source is what the run reads; nil reads the job's [input] (or
	// Input). RunFiles, RunChunks and rerun pass files already listed.
	Source source.Input
}

// Result is what a run reports.
type Result struct {
	Job         string             `json:"job"`
	Pipeline    string             `json:"pipeline"`
	Mode        string             `json:"mode"`
	Decision    string             `json:"decision"`
	Changed     []string           `json:"changed"`
	FirstLoad   bool               `json:"first_load"`
	JobKey      string             `json:"job_key"`
	Snapshot    int64              `json:"snapshot"`
	Parent      int64              `json:"parent"`
	BatchID     string             `json:"batch_id,omitempty"`
	RowsIn      int64              `json:"rows_in"`
	RowsOut     int64              `json:"rows_out"`
	Outcomes    map[string]int64   `json:"outcomes"`
	Cursor      int64              `json:"cursor"`
	Epoch       int64              `json:"epoch"`
	Target      string             `json:"target"`
	InputSHA256 string             `json:"input_sha256"`
	Inputs      []source.InputFile `json:"inputs"`
	Parts       job.Parts          `json:"parts"`
	// IgnoredColumns names, as "file: column", the input columns that
	// [input] extra_columns = "ignore" skipped.
	IgnoredColumns []string `json:"ignored_columns,omitempty"`

	// RowsWritten is what this run wrote (see countWritten), beside
	// RowsOut, the target's row count after the run; 0 when it wrote
	// nothing.
	RowsWritten int64 `json:"rows_written"`
	// Conflicts is the number of conflict rows the target holds after a
	// committed run, for a pipeline that keeps conflicts in its target
	// (ConflictColumn); null otherwise.
	Conflicts *int64 `json:"conflicts"`
}

// Prepared is everything a run computes before it opens its transaction.
type Prepared struct {
	input   source.Input
	in      *source.Resolved
	files   []source.InputFile // in.Files
	format  string             // in.Format
	chunk   *source.Chunk      // in.Chunk
	parts   job.Parts
	key     string
	batchID string
	digest  string // the ledger's batch digest: input digest plus bounds
	// scrubbed are retained raw copies replaced by copies without erased
	// rows; they are deleted after the commit (see scrubErased).
	scrubbed []string
	// retained is set once the run starts copying its input into the
	// store: a run that then commits nothing sweeps its copy away.
	retained bool
}

// Prepare is what a run of j computes before its transaction: it resolves
// the input and derives the job key, the batch id and the batch digest.
func Prepare(ctx context.Context, j *job.Job, opts RunOptions) (*Prepared, error) {
	if (opts.From == nil) != (opts.To == nil) {
		return nil, job.Usage("--from and --to go together")
	}
	if opts.From != nil {
		if j.Pipeline.Mode != job.ModeApply {
			return nil, job.Usage("--from/--to apply to apply-mode jobs; %s is a %s job", j.Name, j.Pipeline.Mode)
		}
		if *opts.To <= *opts.From {
			return nil, job.Usage("--to %d must be greater than --from %d: a batch covers (from, to]", *opts.To, *opts.From)
		}
	}
	input := opts.Source
	if input == nil {
		input = &source.Files{Job: j, Path: opts.Input, Progress: opts.Progress}
	}
	in, err := input.Resolve(ctx)
	if err != nil {
		return nil, err
	}
	files, format := in.Files, in.Format
	parts := job.Parts{
		Input:     in.Digest,
		Transform: j.TransformPart(),
		Config:    j.Config(format),
		Schema:    j.SchemaPart(),
	}
	p := &Prepared{input: input, in: in, files: files, format: format, chunk: in.Chunk, parts: parts, key: parts.Key()}
	p.digest = parts.Input
	if j.Pipeline.Mode == job.ModeApply {
		p.batchID = opts.BatchID
		if p.batchID == "" {
			p.batchID = filepath.Base(files[0].Path)
			if len(files) > 1 {
				p.batchID = "files-" + parts.Input[:16]
			}
		}
		if opts.From != nil {
			p.digest = job.DigestString(string(job.CanonicalJSON(map[string]any{
				"input": parts.Input, "from": *opts.From, "to": *opts.To,
			})))
		}
		if p.chunk != nil {
			p.batchID, p.digest = p.chunk.Name(p.parts.Input, files)
			if opts.BatchID != "" {
				p.batchID = opts.BatchID // a rerun replays a recorded chunk
			}
		}
	}
	return p, nil
}

// Run runs job once: one transaction on one pinned connection that either
// commits the target, its history, the outcomes, the ledger, the snapshot
// and the state row together, or changes nothing. A run refused by a guard
// returns a *RefusedError; skipped and already-committed runs return a
// Result and no error.
func (d *DB) Run(ctx context.Context, j *job.Job, opts RunOptions) (*Result, error) {
	res, err := d.run(ctx, j, opts)
	return res, job.Fatal(err)
}

func (d *DB) run(ctx context.Context, j *job.Job, opts RunOptions) (*Result, error) {
	if d.readOnly {
		return nil, errors.New("database opened read-only")
	}
	p, err := Prepare(ctx, j, opts)
	if err != nil {
		return nil, d.logError(j, opts.BatchID, job.Canceled(ctx, err))
	}
	conn, err := d.sql.Conn(ctx)
	if err != nil {
		return nil, job.Canceled(ctx, fmt.Errorf("connect %s: %w", d.path, err))
	}
	defer conn.Close()
	opts.Progress = withQueryProgress(ctx, opts.Progress, conn)

	fault(opts, FaultBeforeBegin)
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		return nil, job.Canceled(ctx, fmt.Errorf("begin: %w", err))
	}
	res, logRow, err := d.runTx(ctx, tx, j, p, opts)
	if err != nil || res.Decision == job.DecisionSkipped || res.Decision == job.DecisionAlreadyCommitted {
		rbErr := tx.Rollback()
		if p.retained {
			// The copy this run retained is named by no committed row.
			_, _ = source.Sweep(context.WithoutCancel(ctx), d.sql, d.path)
		}
		if err != nil {
			err = job.Canceled(ctx, err)
			decision := job.DecisionFailed
			if errors.Is(err, job.ErrRefused) {
				decision = job.DecisionRefused
			}
			d.logOutside(j, p, decision, err.Error())
			if rbErr != nil && !errors.Is(rbErr, sql.ErrTxDone) {
				err = errors.Join(err, fmt.Errorf("rollback: %w", rbErr))
			}
			return nil, err
		}
		d.logNoCommit(j, p, res, opts)
		return res, nil
	}
	_ = logRow
	fault(opts, FaultBeforeCommit)
	done := opts.Progress.Start("commit")
	err = tx.Commit()
	done()
	if err != nil {
		err = job.Canceled(ctx, fmt.Errorf("commit: %w", err))
		d.logOutside(j, p, job.DecisionFailed, err.Error())
		return nil, err
	}
	fault(opts, FaultAfterCommit)
	for _, path := range p.scrubbed {
		_ = os.Remove(path)
	}
	// Keep the WAL short: DuckDB replays it on open, and index DDL in a WAL
	// has had replay bugs. A failure here does not undo the commit.
	fault(opts, FaultCheckpoint)
	done = opts.Progress.Start("checkpoint")
	_, _ = conn.ExecContext(context.WithoutCancel(ctx), "CHECKPOINT")
	done()
	fault(opts, FaultAfterCheckpoint)
	return res, nil
}

func fault(opts RunOptions, point string) {
	if opts.Fault != nil {
		opts.Fault(point)
	}
}

// logOutside records a run that committed nothing (skipped, refused, failed)
// in the run log, in its own short transaction after the rollback.
func (d *DB) logOutside(j *job.Job, p *Prepared, decision, message string) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	st, err := catalog.ReadState(ctx, d.sql, j.Name)
	if err != nil {
		return
	}
	var changed []string
	if st.HasParts {
		changed = p.parts.Changed(st.Parts)
	}
	_ = catalog.InsertRun(ctx, d.sql, catalog.RunRow{Job: j.Name, BatchID: p.batchID, Decision: decision,
		Changed: string(job.CanonicalJSON(job.NonNil(changed))), Snapshot: st.Snapshot, Cursor: st.Cursor, Epoch: st.Epoch, Message: message})
}

// decide runs the guards of a run inside tx and returns the run's result
// so far: the job's state row, then epoch, table owners, the target's
// integrity, key equality (refresh: skipped) or batch identity (apply:
// already committed), cursor, the input mode's files or chunk, the expected
// parent and the released SQL. done is true when the run has nothing to
// write. A run decides with write; a plan decides the same way without it,
// claiming no table and recording no released version, in a transaction it
// rolls back.
func (d *DB) decide(ctx context.Context, tx *sql.Tx, j *job.Job, p *Prepared, opts RunOptions, write bool) (res *Result, st catalog.State, exists, done bool, err error) {
	st, err = catalog.ReadState(ctx, tx, j.Name)
	if err != nil {
		return nil, st, false, false, err
	}
	res = &Result{
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
		res.Changed = job.NonNil(p.parts.Changed(st.Parts))
	} else {
		res.FirstLoad = true
	}

	// Guards, in the order of the batch lab: epoch, identity, cursor; then the
	// expected parent.
	if err := st.CheckEpoch(j, opts.Epoch); err != nil {
		return nil, st, false, false, err
	}
	// A plan may read a database from before idem.owners, which only a
	// writable open creates.
	owners := write
	if !write {
		if owners, err = catalog.TableExists(ctx, tx, "idem", "owners"); err != nil {
			return nil, st, false, false, err
		}
	}
	if owners {
		if err := catalog.CheckOwners(ctx, tx, j, write); err != nil {
			return nil, st, false, false, err
		}
	}
	if err := checkTarget(ctx, tx, j, st); err != nil {
		return nil, st, false, false, err
	}
	exists, err = catalog.TableExists(ctx, tx, "main", j.Table)
	if err != nil {
		return nil, st, false, false, err
	}
	switch j.Pipeline.Mode {
	case job.ModeRefresh:
		if st.Exists && st.Key == p.key && exists {
			// The target already holds this snapshot: report its counts.
			res.Decision = job.DecisionSkipped
			var outcomes string
			if res.RowsIn, outcomes, err = catalog.SnapshotCounts(ctx, tx, j.Name, st.Snapshot); err != nil {
				return nil, st, false, false, err
			}
			_ = json.Unmarshal([]byte(outcomes), &res.Outcomes)
			res.RowsOut, err = catalog.CountRows(ctx, tx, j.Table)
			return res, st, exists, true, err
		}
	case job.ModeApply:
		done, err := d.checkLedger(ctx, tx, j, p, res)
		if err != nil || done {
			return res, st, exists, true, err
		}
		if opts.From != nil && *opts.From != st.Cursor {
			what := "a gap"
			if *opts.From < st.Cursor {
				what = "an overlap"
			}
			return nil, st, false, false, job.Refuse("cursor", "batch %s starts at %d but the job's cursor is %d (%s): the next batch must start at %d", p.batchID, *opts.From, st.Cursor, what, st.Cursor)
		}
		// Directory and chunked inputs (files.go, chunks.go).
		if err := checkInputMode(ctx, tx, j, p, st, opts); err != nil {
			return nil, st, false, false, err
		}
	}
	// A retry whose work already landed (skipped, already committed) is
	// answered above; only a run that would write checks its parent.
	if err := st.CheckParent(opts.ExpectParent); err != nil {
		return nil, st, false, false, err
	}
	if err := catalog.CheckReleased(ctx, tx, j, write); err != nil {
		return nil, st, false, false, err
	}
	return res, st, exists, false, nil
}

// runTx is the transaction of one run as a list of phases, each a method
// of txRun below. A phase that finds nothing to write stops the list and
// the run commits nothing (skipped, already committed); an error rolls it
// back. committed is true when every phase ran and COMMIT may follow.
func (d *DB) runTx(ctx context.Context, tx *sql.Tx, j *job.Job, p *Prepared, opts RunOptions) (res *Result, committed bool, err error) {
	r := &txRun{d: d, tx: tx, j: j, p: p, opts: opts}
	for _, phase := range []func(context.Context) (bool, error){
		r.guards,     // the state row and every guard (decide)
		r.retain,     // copy the input into the store and record it
		r.stage,      // bind the variables, stage the input as view input
		r.steps,      // erasures, the target's DDL, the steps and quality rules
		r.balance,    // exactly one outcome per staged row
		r.history,    // scrub erased rows, history, rows written
		r.commitRows, // ledger, snapshot, state, run log and file rows
	} {
		more, err := phase(ctx)
		if err != nil {
			return nil, false, err
		}
		if !more {
			return r.res, false, nil
		}
	}
	return r.res, true, nil
}

// checkTarget refuses a run when the job's state row says its target holds
// snapshot S but the table is missing or holds another number of rows than
// S recorded: the table was dropped or changed outside idem, and a skip, an
// already-committed answer or a batch applied over the wrong rows would hide
// it. The refusal says how to repair: a rollback to S rebuilds the table
// from its history.
func checkTarget(ctx context.Context, tx catalog.Querier, j *job.Job, st catalog.State) error {
	if !st.Exists || st.Snapshot == 0 || !strings.EqualFold(st.Target, j.Table) {
		return nil
	}
	want, err := catalog.SnapshotRowsOut(ctx, tx, j.Name, st.Snapshot)
	if err != nil {
		return err
	}
	var exists bool
	if err := tx.QueryRowContext(ctx, `SELECT count(*) > 0 FROM duckdb_tables()
		WHERE database_name = current_database() AND schema_name = 'main' AND lower(table_name) = lower(?)`, st.Target).Scan(&exists); err != nil {
		return fmt.Errorf("look up table %s: %w", st.Target, err)
	}
	ref := j.File
	if ref == "" {
		ref = j.Name
	}
	repair := fmt.Sprintf("nothing was changed; repair with `idem rollback %s --to-snapshot %d` (rebuilds the table from its history), then `idem rerun %s` proves it", ref, st.Snapshot, ref)
	if !exists {
		return job.Refuse("target", "table %q of job %q is missing, but the job's state says it holds snapshot %d (%d rows): %s",
			st.Target, j.Name, st.Snapshot, want.Int64, repair)
	}
	if !want.Valid {
		return nil
	}
	n, err := catalog.CountRows(ctx, tx, st.Target)
	if err != nil {
		return err
	}
	if n != want.Int64 {
		return job.Refuse("target", "table %q of job %q holds %d rows, but snapshot %d, which the job's state says it holds, has %d: it was changed outside idem; %s",
			st.Target, j.Name, n, st.Snapshot, want.Int64, repair)
	}
	return nil
}

// checkLedger applies the batch identity guard. It reports done when the
// batch was already committed with the same digest.
func (d *DB) checkLedger(ctx context.Context, tx *sql.Tx, j *job.Job, p *Prepared, res *Result) (bool, error) {
	row, ok, err := catalog.ReadLedger(ctx, tx, j.Name, p.batchID)
	if err != nil || !ok {
		return false, err
	}
	if row.Digest != p.digest {
		return false, job.Refuse("batch", "batch %s was committed with digest %s; this input's digest is %s: a changed batch needs a new batch id", p.batchID, row.Digest[:12], p.digest[:12])
	}
	res.Decision = job.DecisionAlreadyCommitted
	res.RowsIn = row.RowsIn
	res.Snapshot = row.Snapshot
	_ = json.Unmarshal([]byte(row.Outcomes), &res.Outcomes)
	rowsOut, err := catalog.CountRows(ctx, tx, j.Table)
	if err == nil {
		res.RowsOut = rowsOut
	}
	return true, nil
}

// bindVariables binds the params and idem's own values as DuckDB variables
// that the step SQL reads with getvariable('name').
func bindVariables(ctx context.Context, tx *sql.Tx, j *job.Job, p *Prepared, snapshot int64) error {
	vars := map[string]any{
		"idem_job":      j.Name,
		"idem_batch_id": p.batchID,
		"idem_snapshot": snapshot,
	}
	for k, v := range j.Params {
		vars[k] = v
	}
	for _, k := range job.SortedKeys(vars) {
		if _, err := tx.ExecContext(ctx, "SET VARIABLE "+job.QuoteIdent(k)+" = ?", vars[k]); err != nil {
			return fmt.Errorf("bind %s: %w", k, err)
		}
	}
	return nil
}

// buildTarget runs the schema DDL. For an apply job whose table exists (a
// schema change), the rows are carried over by column name.
func (d *DB) buildTarget(ctx context.Context, tx *sql.Tx, j *job.Job, existed bool) error {
	carry := existed && j.Pipeline.Mode == job.ModeApply
	if carry {
		if _, err := tx.ExecContext(ctx, "CREATE OR REPLACE TEMP TABLE idem_prev AS SELECT * FROM "+job.QuoteIdent(j.Table)); err != nil {
			return fmt.Errorf("keep rows of %s for the schema change: %w", j.Table, err)
		}
	}
	if _, err := tx.ExecContext(ctx, j.Expand(j.DDL)); err != nil {
		return fmt.Errorf("schema v%d of pipeline %s: %w", j.SchemaVersion, j.Pipeline.Name, catalog.TrimSQLError(err))
	}
	if carry {
		cols, err := commonColumns(ctx, tx, j.Table)
		if err != nil {
			return err
		}
		list := strings.Join(cols, ", ")
		if _, err := tx.ExecContext(ctx, "INSERT INTO "+job.QuoteIdent(j.Table)+" ("+list+") SELECT "+list+" FROM idem_prev"); err != nil {
			return fmt.Errorf("carry rows of %s into schema v%d: %w", j.Table, j.SchemaVersion, catalog.TrimSQLError(err))
		}
	}
	return nil
}

func commonColumns(ctx context.Context, tx *sql.Tx, table string) ([]string, error) {
	rows, err := tx.QueryContext(ctx, `
		SELECT c.column_name FROM duckdb_columns() c
		JOIN duckdb_columns() p ON p.column_name = c.column_name
		WHERE c.database_name = current_database() AND c.schema_name = 'main' AND c.table_name = ?
		  AND p.database_name = 'temp' AND p.table_name = 'idem_prev'
		ORDER BY c.column_index`, table)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var cols []string
	for rows.Next() {
		var c string
		if err := rows.Scan(&c); err != nil {
			return nil, err
		}
		cols = append(cols, job.QuoteIdent(c))
	}
	return cols, rows.Err()
}

func stepError(j *job.Job, step job.Step, err error, p *Prepared) error {
	msg := err.Error()
	if strings.Contains(msg, "Malformed JSON") || strings.Contains(msg, "CSV Error") || strings.Contains(msg, "Invalid unicode") ||
		strings.Contains(msg, "Invalid Input Error") || strings.Contains(msg, "Conversion Error") {
		return source.ReadError(err, p.files, p.format)
	}
	return fmt.Errorf("step %s: %w", step.Name, contractError(j, "step "+step.Name, catalog.TrimSQLError(err)))
}

// outcomeCounts counts this run's outcomes: the rows the commit step stored
// in the pipeline's outcomes table when it declares one (in apply mode, the
// rows of this batch), else the steps' outcomes relation. It also says
// where it counted, for messages.
func outcomeCounts(ctx context.Context, tx *sql.Tx, j *job.Job, batchID string) (map[string]int64, string, error) {
	from, where := "outcomes", "in the outcomes relation"
	if t := j.Pipeline.OutcomesTable; t != "" {
		from, where = job.QuoteIdent(j.Table+t), "stored in "+j.Table+t
		if j.Pipeline.Mode == job.ModeApply {
			from += " WHERE batch_id = getvariable('idem_batch_id')"
			where += " for batch " + batchID
		}
	}
	rows, err := tx.QueryContext(ctx, "SELECT outcome, count(*) FROM "+from+" GROUP BY outcome ORDER BY outcome")
	if err != nil {
		return nil, "", fmt.Errorf("count outcomes %s: %w", where, catalog.TrimSQLError(err))
	}
	defer rows.Close()
	out := map[string]int64{}
	for rows.Next() {
		var o sql.NullString
		var n int64
		if err := rows.Scan(&o, &n); err != nil {
			return nil, "", err
		}
		if !o.Valid {
			return nil, "", errors.New("pipeline gave a row no outcome (NULL); nothing committed")
		}
		out[o.String] = n
	}
	return out, where, rows.Err()
}

// writeCommitRows writes the ledger row (apply), the snapshot row, the state
// row and the run log row, all inside the run's transaction.
func (d *DB) writeCommitRows(ctx context.Context, tx *sql.Tx, j *job.Job, p *Prepared, st catalog.State, res *Result, opts RunOptions) error {
	outcomes := string(job.CanonicalJSON(res.Outcomes))
	if j.Pipeline.Mode == job.ModeApply {
		from, to := bounds(opts, p.chunk)
		if err := catalog.InsertLedger(ctx, tx, catalog.NewBatch{Job: j.Name, BatchID: p.batchID, Digest: p.digest, InputDigest: p.parts.Input,
			From: from, To: to, RowsIn: res.RowsIn, Outcomes: outcomes, Snapshot: res.Snapshot}); err != nil {
			return err
		}
	}
	inputs := make([]map[string]any, len(p.files))
	for i, f := range p.files {
		inputs[i] = map[string]any{"sha256": f.SHA256, "bytes": f.Size, "name": filepath.Base(f.Path)}
	}
	cols, err := catalog.TargetColumns(ctx, tx, j.Table)
	if err != nil {
		return err
	}
	from, to := bounds(opts, p.chunk)
	bounds := map[string]any{"from": from, "to": to}
	if err := catalog.InsertSnapshot(ctx, tx, catalog.NewSnapshot{
		Job: j.Name, Snapshot: res.Snapshot, Parent: st.Snapshot, Kind: res.Decision, BatchID: p.batchID,
		JobKey: p.key, Parts: p.parts.JSON(),
		Inputs: string(job.CanonicalJSON(map[string]any{"files": inputs, "format": p.format, "bounds": bounds})),
		RowsIn: res.RowsIn, RowsOut: res.RowsOut, Outcomes: outcomes,
		Columns: string(job.CanonicalJSON(cols)), KeyColumns: string(job.CanonicalJSON(job.NonNil(j.Pipeline.Key))),
	}); err != nil {
		return err
	}
	if err := catalog.WriteState(ctx, tx, j, p.key, p.parts.JSON(), res.Snapshot, res.Cursor, st.Epoch); err != nil {
		return err
	}
	changed := res.Changed
	if res.FirstLoad {
		changed = []string{}
	}
	if err := catalog.InsertRun(ctx, tx, catalog.RunRow{Job: j.Name, BatchID: p.batchID, Decision: res.Decision,
		Changed: string(job.CanonicalJSON(changed)), RowsIn: res.RowsIn, Outcomes: outcomes,
		Snapshot: res.Snapshot, Cursor: res.Cursor, Epoch: st.Epoch}); err != nil {
		return fmt.Errorf("write run log: %w", err)
	}
	if err := catalog.RecordCommit(ctx, tx, j.Name, res.Decision); err != nil { // dbfile.go
		return err
	}
	return recordFiles(ctx, tx, j, p, res) // files.go
}
