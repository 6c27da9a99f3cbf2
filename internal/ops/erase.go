package ops

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"

	"github.com/idem-dev/idem/internal/catalog"
	"github.com/idem-dev/idem/internal/job"
	"github.com/idem-dev/idem/internal/run"
	"github.com/idem-dev/idem/internal/source"
)

// EraseOptions name the subject to erase: a value of the pipeline's key
// (Key), or a value of the job's [privacy] subject columns (Subject).
type EraseOptions struct {
	Key string
	// Subject erases every row in which one of the job's [privacy] subject
	// columns holds it, and every other row of the same keys (another
	// version of the same record).
	Subject string
	// SubjectColumns overrides the job's [privacy] subject (a rerun
	// replays an erasure by the columns it recorded).
	SubjectColumns []string
	// Position overrides the erasure point (the highest position seen for
	// the key). A pinned re-run uses it to replay a recorded erasure.
	Position *int64
	// Replay commits the erasure even where the key is found nowhere (a
	// pinned re-run replays it over inputs already rewritten without it).
	// A replay is not a writer of the job and is never fenced.
	Replay bool
	// ExpectParent and Epoch are the writer guards of a run (exit 3).
	ExpectParent *int64
	Epoch        *int64
	// DryRun rolls the erasure back once it is done (EraseChain): its
	// result says what it would change.
	DryRun bool
	// cascade marks the erasure of a job that reads an erased one: a job
	// that holds none of the rows is left as it is (no result).
	cascade bool
	// Fault is called at the fault points an erasure passes (after_target:
	// rows deleted and inputs rewritten; before_commit; after_commit, before
	// the replaced files are deleted; checkpoint; after_checkpoint), as
	// RunOptions.Fault is for a run.
	Fault func(point string)
}

// EraseResult reports an erasure. It never holds the subject's payload.
type EraseResult struct {
	Job string `json:"job"`
	// Key is the key value erased (--key); with --subject, Subject is the
	// value, SubjectColumns the columns it was looked for in and Keys the
	// values of the pipeline's key its rows had.
	Key            string   `json:"key"`
	Subject        string   `json:"subject,omitempty"`
	SubjectColumns []string `json:"subject_columns,omitempty"`
	Keys           []string `json:"keys,omitempty"`
	Snapshot       int64    `json:"snapshot"`
	Parent         int64    `json:"parent"`
	// Position is the erasure point: a later batch carrying the key at or
	// below it gets outcome erased.
	Position *int64 `json:"position"`
	// Removed counts the rows removed per table; history counts every
	// snapshot's version of the rows.
	Removed map[string]int64        `json:"removed"`
	Inputs  []source.RewrittenInput `json:"inputs"`
	// Packets are the snapshots whose release packet was rewritten (the
	// sha256 it replaced is kept in it; idem show).
	Packets []int64 `json:"packets_rewritten,omitempty"`
	// AlreadyErased says the key was erased before and found nowhere:
	// nothing was committed and Snapshot is the latest.
	AlreadyErased bool `json:"already_erased"`
	// Downstream are the erasures in the jobs that read this one,
	// Recomputed the models rebuilt without the subject and Untouched the
	// readers that held none of it (idem erase JOB).
	Downstream []*EraseResult     `json:"downstream,omitempty"`
	Recomputed []*RecomputeResult `json:"recomputed,omitempty"`
	Untouched  []string           `json:"untouched,omitempty"`
	DryRun     bool               `json:"dry_run,omitempty"`
	// Replica reports the read replica published after the erasure
	// ([duckdb] read_replica).
	Replica *run.ReplicaInfo `json:"replica,omitempty"`
}

// companionTables are the tables the job's schema DDL creates beside the
// target ({{table:_suffix}}) that exist and hold the key column (any, with
// keyCol "").
func companionTables(ctx context.Context, q catalog.Querier, j *job.Job, keyCol string) ([]string, error) {
	seen := map[string]bool{}
	var out []string
	for _, m := range job.Companion.FindAllStringSubmatch(j.DDL, -1) {
		name := j.Table + m[1]
		if seen[name] {
			continue
		}
		seen[name] = true
		exists, err := catalog.TableExists(ctx, q, "main", name)
		if err != nil {
			return nil, err
		}
		if !exists {
			continue // a view, or not created
		}
		cols, err := catalog.TargetColumns(ctx, q, name)
		if err != nil {
			return nil, err
		}
		for _, c := range cols {
			if keyCol == "" || c.Name == keyCol {
				out = append(out, name)
				break
			}
		}
	}
	return out, nil
}

// Erase removes one subject (a value of the job's key column) in ONE
// transaction: from the current rows, from every snapshot's history, from
// the companion tables (<target>_outcomes, tombstones) and from the retained
// inputs, which are rewritten without the subject's rows and stored under
// their new sha256. It records the erasure (job, key, the highest position
// seen for the key, snapshot, time: never the payload) so that a later batch
// carrying the key at or below that position gets outcome erased, and
// commits it as a new snapshot. Replaced input files are deleted after the
// commit when no snapshot refers to them; a kill before that leaves them to
// the next open of the database, which deletes every retained file no
// committed row names (sweepInputs). A key found nowhere is an error
// and nothing is committed, unless it was erased before: then the result
// says AlreadyErased and nothing changes.
func Erase(ctx context.Context, d *run.DB, j *job.Job, opts EraseOptions) (*EraseResult, error) {
	m, err := eraseMatchOf(j, opts)
	if err != nil {
		return nil, err
	}
	conn, tx, err := d.BeginPinned(ctx)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	fault := func(point string) {
		if opts.Fault != nil {
			opts.Fault(point)
		}
	}
	res, stale, err := eraseTx(ctx, d, tx, j, m, opts)
	if err == nil && !res.AlreadyErased {
		fault(run.FaultAfterTarget)
	}
	if err != nil || res.AlreadyErased {
		rbErr := ignoreDone(tx.Rollback())
		// Files rewritten for an erasure that did not commit are named by
		// no committed row.
		_, _ = source.Sweep(context.WithoutCancel(ctx), d.SQL(), d.Path())
		if err != nil {
			return nil, errors.Join(err, rbErr)
		}
		return res, rbErr
	}
	// A replica holding the subject goes before the erasure commits: a
	// kill from here until the new one is published leaves none, which the
	// next writable open publishes.
	if err := d.WithdrawReplica(); err != nil {
		return nil, errors.Join(err, ignoreDone(tx.Rollback()))
	}
	// So do the rows kept by reruns that did not reproduce (they are
	// diagnostics, rebuilt by the next such rerun).
	if err := removeRerunKept(d.Path(), j.Name); err != nil {
		return nil, errors.Join(fmt.Errorf("erase: remove the rows kept by reruns: %w", err), ignoreDone(tx.Rollback()))
	}
	fault(run.FaultBeforeCommit)
	if err := tx.Commit(); err != nil {
		_, _ = source.Sweep(context.WithoutCancel(ctx), d.SQL(), d.Path())
		return nil, fmt.Errorf("commit erasure: %w", err)
	}
	fault(run.FaultAfterCommit)
	// The old files held the subject; they go once nothing refers to them.
	// One that cannot be deleted now is deleted by the next open for
	// writing: the erasure is committed either way.
	for _, p := range stale {
		_ = os.Remove(p)
	}
	fault(run.FaultCheckpoint)
	_, _ = conn.ExecContext(context.WithoutCancel(ctx), "CHECKPOINT")
	fault(run.FaultAfterCheckpoint)
	res.Replica = d.PublishReplica(ctx, opts.Fault)
	return res, nil
}

func ignoreDone(err error) error {
	if errors.Is(err, sql.ErrTxDone) {
		return nil
	}
	return err
}

func eraseTx(ctx context.Context, d *run.DB, tx *sql.Tx, j *job.Job, m *eraseMatch, opts EraseOptions) (*EraseResult, []string, error) {
	st, err := catalog.ReadState(ctx, tx, j.Name)
	if err != nil {
		return nil, nil, err
	}
	if !opts.Replay {
		if err := st.CheckEpoch(j, opts.Epoch); err != nil {
			return nil, nil, err
		}
		if err := st.CheckParent(opts.ExpectParent); err != nil {
			return nil, nil, err
		}
	}
	if st.Snapshot == 0 {
		return nil, nil, job.Usage("job %s has no snapshot yet: nothing to erase", j.Name)
	}
	// Another job's table first, then this job's own pipeline and target.
	if err := catalog.CheckOwners(ctx, tx, j, true); err != nil {
		return nil, nil, err
	}
	if err := st.CheckIdentity(j); err != nil {
		return nil, nil, err
	}
	res := &EraseResult{Job: j.Name, Parent: st.Snapshot, Snapshot: st.Snapshot + 1,
		Removed: map[string]int64{}, Inputs: []source.RewrittenInput{}}
	if m.subject != nil {
		res.Subject, res.SubjectColumns = m.value, m.subject
	} else {
		res.Key = m.value
	}
	e := &eraser{res: res, m: m, posCol: j.Pipeline.Position, keyPos: map[string]sql.NullInt64{}}

	// Tables: the target, its history and the companions.
	places, err := e.places(ctx, tx, j)
	if err != nil {
		return nil, nil, err
	}
	if err := e.resolveKeys(ctx, tx, places); err != nil {
		return nil, nil, err
	}
	if err := e.fromTables(ctx, tx, places, opts); err != nil {
		return nil, nil, err
	}

	// Retained inputs of every snapshot of the job.
	snaps, err := catalog.ReadSnapshots(ctx, tx, j.Name, st.Snapshot)
	if err != nil {
		return nil, nil, err
	}
	rewritten, err := e.fromInputs(ctx, d, tx, j, snaps)
	if err != nil {
		return nil, nil, err
	}
	if !e.found && opts.cascade {
		return nil, nil, nil
	}
	if !e.found && !opts.Replay {
		prior, err := catalog.CountErasures(ctx, tx, j.Name, m.value, m.subject != nil)
		if err != nil {
			return nil, nil, err
		}
		if prior > 0 {
			// Erasing again finds nothing: the first erasure stands.
			res.AlreadyErased = true
			res.Snapshot = st.Snapshot
			return res, nil, nil
		}
		if m.subject != nil {
			return nil, nil, fmt.Errorf("erase subject %s from job %s: no row, snapshot or retained input holds it in %s; nothing committed", m.value, j.Name, strings.Join(m.subject, ", "))
		}
		return nil, nil, fmt.Errorf("erase %s from job %s: the key is in no row, snapshot or retained input; nothing committed", m.value, j.Name)
	}
	if m.subject == nil {
		pos := e.maxPos
		if opts.Position != nil {
			pos = sql.NullInt64{Int64: *opts.Position, Valid: true}
		}
		if pos.Valid {
			res.Position = &pos.Int64
		}
	}

	// Point every snapshot row at the rewritten files.
	stale, err := repoint(ctx, d, tx, j, snaps, rewritten, res.Inputs)
	if err != nil {
		return nil, nil, err
	}
	for _, col := range slices.Sorted(maps.Keys(m.values)) {
		for _, v := range m.values[col] {
			if err := catalog.ScrubPackets(ctx, tx, j.Name, []string{col}, v); err != nil {
				return nil, nil, err
			}
		}
	}
	// The erasure and its snapshot: an erasure by subject is recorded with
	// its columns, and, for each key its rows had, as an erasure of that
	// key (the guard against an older batch of the key).
	if err := catalog.RecordErasure(ctx, tx, j.Name, m.value, res.Position, res.Snapshot, m.subject); err != nil {
		return nil, nil, err
	}
	if m.subject != nil && m.keyCol != "" {
		res.Keys = m.values[m.keyCol]
		for _, k := range res.Keys {
			var pos *int64
			if p := e.keyPos[k]; p.Valid {
				pos = &p.Int64
			}
			if err := catalog.RecordErasure(ctx, tx, j.Name, k, pos, res.Snapshot, nil); err != nil {
				return nil, nil, err
			}
		}
	}
	// Checkpoints hold the subject in their target rows: rewritten without
	// it, the old files deleted after the commit like the inputs.
	scrubbed, err := run.ScrubCheckpoints(ctx, d, tx, j, m.filter(""))
	if err != nil {
		return nil, nil, err
	}
	stale = append(stale, scrubbed...)
	key, parts := st.Key, st.PartsJSON()
	if opts.cascade {
		// A reader whose upstream this erasure moved reads on from there.
		if key, parts, err = repinErased(ctx, tx, st); err != nil {
			return nil, nil, err
		}
	}
	if err := catalog.WriteSnapshotOnly(ctx, tx, j, st, res.Snapshot, job.KindErase, catalog.SnapshotInputs{Files: []catalog.InputRef{}}, key, parts); err != nil {
		return nil, nil, err
	}
	if _, err := run.WriteCheckpoint(ctx, d, tx, j, res.Snapshot, opts.Fault); err != nil {
		return nil, nil, err
	}
	return res, stale, nil
}

// eraseMatch is what an erasure removes: the rows in which a column of
// values holds one of its values. By key it is {key: [K]}; by subject, the
// subject columns with the value, and (once resolveKeys has run) the
// pipeline's key with the values the subject's rows had.
type eraseMatch struct {
	value   string
	subject []string // nil: an erasure by key
	keyCol  string   // the pipeline's one key column, or ""
	values  map[string][]string
}

// eraseMatchOf checks what opts ask to erase from j.
func eraseMatchOf(j *job.Job, opts EraseOptions) (*eraseMatch, error) {
	keys := j.Pipeline.Key
	if len(keys) == 0 {
		keys = j.Key
	}
	m := &eraseMatch{values: map[string][]string{}}
	if len(keys) == 1 {
		m.keyCol = keys[0]
	}
	switch {
	case opts.Key != "" && opts.Subject != "":
		return nil, job.Usage("erase takes --key K or --subject VALUE, not both")
	case opts.Subject != "":
		m.value, m.subject = opts.Subject, opts.SubjectColumns
		if m.subject == nil {
			m.subject = j.Privacy.Subject
		}
		if len(m.subject) == 0 {
			return nil, job.Usage("erase --subject needs the job to name its subject columns: %s has no [privacy] subject (for example subject = [\"customer_id\"]); or erase a key with --key", j.Name)
		}
		for _, c := range m.subject {
			m.values[c] = []string{opts.Subject}
		}
	case opts.Key != "":
		if m.keyCol == "" {
			return nil, job.Usage("erase --key needs a pipeline with one key column; %s has %d: declare [privacy] subject and erase with --subject", j.Name, len(keys))
		}
		m.value = opts.Key
		m.values[m.keyCol] = []string{opts.Key}
	default:
		return nil, job.Usage("erase needs --key K or --subject VALUE")
	}
	return m, nil
}

// filter is the match as a filter of retained files, reading posCol.
func (m *eraseMatch) filter(posCol string) source.RowFilter {
	if m.subject == nil {
		return source.KeyFilter(m.keyCol, posCol, m.value)
	}
	return source.MatchFilter(posCol, m.values)
}

// where is the match as a SQL condition over the columns present; "" when
// none of them is.
func (m *eraseMatch) where(present map[string]bool) string {
	return source.ValuesSQL(m.values, present)
}

// eraser is what the steps of an erasure share: the result so far, the
// match, the position column, the highest valid position seen (and per key
// by subject) and whether any row matched.
type eraser struct {
	res    *EraseResult
	m      *eraseMatch
	posCol string
	maxPos sql.NullInt64
	keyPos map[string]sql.NullInt64
	found  bool
}

func (e *eraser) seePos(p sql.NullInt64) {
	e.maxPos = source.MaxPosition(e.maxPos, p)
}

// place is a table an erasure deletes from: its label in the result, its
// quoted name and its columns.
type place struct {
	label, name string
	cols        map[string]bool
}

// places are the target, its history and the companions. The target must
// hold one of the columns matched.
func (e *eraser) places(ctx context.Context, tx *sql.Tx, j *job.Job) ([]place, error) {
	matchCol := e.m.keyCol
	if e.m.subject != nil {
		matchCol = ""
	}
	tables, err := companionTables(ctx, tx, j, matchCol)
	if err != nil {
		return nil, err
	}
	places := []place{{label: j.Table, name: job.QuoteIdent(j.Table)}}
	if ok, err := catalog.TableExists(ctx, tx, "idem", j.Name+"__history"); err != nil {
		return nil, err
	} else if ok {
		places = append(places, place{label: "history", name: catalog.HistoryTable(j.Name)})
	}
	for _, t := range tables {
		if t != j.Table {
			places = append(places, place{label: t, name: job.QuoteIdent(t)})
		}
	}
	for i := range places {
		cols, err := columnsOf(ctx, tx, places[i].name)
		if err != nil {
			return nil, err
		}
		places[i].cols = cols
	}
	if e.m.where(places[0].cols) == "" {
		return nil, job.Usage("erase from job %s: target %s has none of the columns %s", j.Name, j.Table, strings.Join(slices.Sorted(maps.Keys(e.m.values)), ", "))
	}
	return places, nil
}

// resolveKeys adds to an erasure by subject the values of the pipeline's
// key that the subject's rows have in any table: every version of those
// records goes, and each key is guarded against an older batch.
func (e *eraser) resolveKeys(ctx context.Context, tx *sql.Tx, places []place) error {
	if e.m.subject == nil || e.m.keyCol == "" {
		return nil
	}
	keys := map[string]bool{}
	for _, p := range places {
		where := e.m.where(p.cols)
		if where == "" || !p.cols[e.m.keyCol] {
			continue
		}
		rows, err := tx.QueryContext(ctx, "SELECT DISTINCT CAST("+job.QuoteIdent(e.m.keyCol)+" AS VARCHAR) FROM "+p.name+" WHERE "+where+" AND "+job.QuoteIdent(e.m.keyCol)+" IS NOT NULL")
		if err != nil {
			return fmt.Errorf("erase from %s: %w", p.label, catalog.TrimSQLError(err))
		}
		for rows.Next() {
			var k string
			if err := rows.Scan(&k); err != nil {
				rows.Close()
				return err
			}
			keys[k] = true
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
	}
	if len(keys) > 0 {
		e.m.values[e.m.keyCol] = slices.Sorted(maps.Keys(keys))
	}
	return nil
}

// fromTables deletes the matched rows from the target, its history and the
// companions, noting the highest valid position they held (per key).
func (e *eraser) fromTables(ctx context.Context, tx *sql.Tx, places []place, opts EraseOptions) error {
	for _, p := range places {
		where := e.m.where(p.cols)
		if where == "" {
			continue
		}
		if p.cols[e.posCol] && e.m.keyCol != "" && p.cols[e.m.keyCol] {
			// A row's position counts only where the pipeline judged it
			// valid: a table that stores outcomes keeps invalid rows as
			// received ("1e18"), and their outcome says so.
			valid := ""
			if p.cols["outcome"] {
				valid = " AND coalesce(outcome NOT LIKE 'invalid%', false)"
			}
			if err := e.positions(ctx, tx, p, where+valid); err != nil {
				return err
			}
		}
		r, err := tx.ExecContext(ctx, "DELETE FROM "+p.name+" WHERE "+where)
		if err != nil {
			return fmt.Errorf("erase from %s: %w", p.label, catalog.TrimSQLError(err))
		}
		n, _ := r.RowsAffected()
		e.res.Removed[p.label] = n
		e.found = e.found || n > 0
	}
	return nil
}

// positions reads the highest valid position of each key among the rows
// of p that match where.
func (e *eraser) positions(ctx context.Context, tx *sql.Tx, p place, where string) error {
	rows, err := tx.QueryContext(ctx, "SELECT CAST("+job.QuoteIdent(e.m.keyCol)+" AS VARCHAR), max("+source.PositionSQL("CAST("+job.QuoteIdent(e.posCol)+" AS VARCHAR)")+") FROM "+p.name+" WHERE "+where+" GROUP BY 1")
	if err != nil {
		return fmt.Errorf("erase from %s: %w", p.label, catalog.TrimSQLError(err))
	}
	defer rows.Close()
	for rows.Next() {
		var k sql.NullString
		var pos sql.NullInt64
		if err := rows.Scan(&k, &pos); err != nil {
			return err
		}
		e.seePos(pos)
		if k.Valid {
			e.keyPos[k.String] = source.MaxPosition(e.keyPos[k.String], pos)
		}
	}
	return rows.Err()
}

// fromInputs rewrites every retained input of the snapshots without the
// key's rows. It returns each input's replacement (itself when it held no
// such row).
func (e *eraser) fromInputs(ctx context.Context, d *run.DB, tx *sql.Tx, j *job.Job, snaps []*catalog.SnapshotRow) (map[string]catalog.InputRef, error) {
	rewritten := map[string]catalog.InputRef{}
	// An expired snapshot's inputs may be gone from the store (idem
	// expire): there is nothing left of the subject to rewrite.
	retained, err := catalog.RetainedSums(ctx, tx)
	if err != nil {
		return nil, err
	}
	for _, s := range snaps {
		format := s.Inputs.Format
		if format == "" {
			format = j.Input.Format
		}
		for _, f := range s.Inputs.Files {
			if _, done := rewritten[f.SHA256]; done {
				continue
			}
			if !retained[f.SHA256] {
				rewritten[f.SHA256] = f
				continue
			}
			rw, pos, err := source.Rewrite(ctx, tx, d.Path(), f, format, e.m.filter(e.posCol))
			if err != nil {
				return nil, err
			}
			// A retained input's rows carry no verdict; where the pipeline
			// stores every row's outcome, the position comes from there.
			if j.Pipeline.OutcomesTable == "" && e.m.subject == nil {
				e.seePos(pos)
			}
			if rw == nil {
				rewritten[f.SHA256] = f
				continue
			}
			e.found = true
			rewritten[f.SHA256] = catalog.InputRef{SHA256: rw.New, Bytes: rw.Bytes, Name: f.Name}
			e.res.Inputs = append(e.res.Inputs, *rw)
		}
	}
	return rewritten, nil
}

// repoint points every snapshot row at the rewritten inputs and records
// them; it returns the retained copies no row names any more, to delete
// after the commit.
func repoint(ctx context.Context, d *run.DB, tx *sql.Tx, j *job.Job, snaps []*catalog.SnapshotRow, rewritten map[string]catalog.InputRef, inputs []source.RewrittenInput) ([]string, error) {
	var stale []string
	if len(inputs) > 0 {
		for _, s := range snaps {
			changed := false
			for i, f := range s.Inputs.Files {
				if nf := rewritten[f.SHA256]; nf.SHA256 != f.SHA256 {
					s.Inputs.Files[i] = nf
					changed = true
				}
			}
			if !changed {
				continue
			}
			if err := catalog.SetSnapshotInputs(ctx, tx, j.Name, s.Snapshot, s.Inputs); err != nil {
				return nil, fmt.Errorf("erase: update inputs of snapshot %d: %w", s.Snapshot, err)
			}
		}
		for _, rw := range inputs {
			if err := catalog.RecordInput(ctx, tx, rw.New, rw.Bytes); err != nil {
				return nil, fmt.Errorf("erase: record input: %w", err)
			}
			refs, err := catalog.InputReferences(ctx, tx, rw.Old)
			if err != nil {
				return nil, fmt.Errorf("erase: count references to input: %w", err)
			}
			if refs == 0 {
				if err := catalog.ForgetInput(ctx, tx, rw.Old); err != nil {
					return nil, fmt.Errorf("erase: forget input: %w", err)
				}
				stale = append(stale, source.RetainedPath(d.Path(), rw.Old))
			}
		}
	}
	return stale, nil
}

func columnsOf(ctx context.Context, q catalog.Querier, qualified string) (map[string]bool, error) {
	rows, err := q.QueryContext(ctx, "SELECT * FROM "+qualified+" LIMIT 0")
	if err != nil {
		return nil, fmt.Errorf("columns of %s: %w", qualified, catalog.TrimSQLError(err))
	}
	defer rows.Close()
	names, err := rows.Columns()
	if err != nil {
		return nil, err
	}
	out := map[string]bool{}
	for _, n := range names {
		out[n] = true
	}
	return out, nil
}
