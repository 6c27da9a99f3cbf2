package runner

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"github.com/idem-dev/idem/runner/catalog"

	"github.com/idem-dev/idem/runner/job"
)

// EraseOptions name the subject to erase.
type EraseOptions struct {
	Key string
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
	// Fault is called at the fault points an erasure passes (after_target:
	// rows deleted and inputs rewritten; before_commit; after_commit, before
	// the replaced files are deleted; checkpoint; after_checkpoint), as
	// RunOptions.Fault is for a run.
	Fault func(point string)
}

// EraseResult reports an erasure. It never holds the subject's payload.
type EraseResult struct {
	Job      string `json:"job"`
	Key      string `json:"key"`
	Snapshot int64  `json:"snapshot"`
	Parent   int64  `json:"parent"`
	// Position is the erasure point: a later batch carrying the key at or
	// below it gets outcome erased.
	Position *int64 `json:"position"`
	// Removed counts the rows removed per table; history counts every
	// snapshot's version of the rows.
	Removed map[string]int64 `json:"removed"`
	Inputs  []RewrittenInput `json:"inputs"`
	// AlreadyErased says the key was erased before and found nowhere:
	// nothing was committed and Snapshot is the latest.
	AlreadyErased bool `json:"already_erased"`
}

// RewrittenInput is a retained input rewritten without the erased key.
type RewrittenInput struct {
	Old         string `json:"old_sha256"`
	New         string `json:"new_sha256"`
	Bytes       int64  `json:"bytes"`
	RowsRemoved int64  `json:"rows_removed"`
}

// companionTables are the tables the job's schema DDL creates beside the
// target ({{table:_suffix}}) that exist and hold the key column.
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
			if c.Name == keyCol {
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
func (d *DB) Erase(ctx context.Context, j *job.Job, opts EraseOptions) (*EraseResult, error) {
	if len(j.Pipeline.Key) != 1 {
		return nil, job.Usage("erase needs a pipeline with one key column; %s has %d", j.Pipeline.Name, len(j.Pipeline.Key))
	}
	if j.Pipeline.Position == "" {
		return nil, job.Usage("erase needs a pipeline that declares its position column (the source order): without one, an erasure could not stop a replay of an old batch; %s declares none", j.Pipeline.Name)
	}
	if opts.Key == "" {
		return nil, job.Usage("erase needs --key K")
	}
	conn, tx, err := d.beginPinned(ctx)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	fault := func(point string) {
		if opts.Fault != nil {
			opts.Fault(point)
		}
	}
	res, stale, err := d.eraseTx(ctx, tx, j, opts)
	if err == nil && !res.AlreadyErased {
		fault(FaultAfterTarget)
	}
	if err != nil || res.AlreadyErased {
		rbErr := ignoreDone(tx.Rollback())
		// Files rewritten for an erasure that did not commit are named by
		// no committed row.
		_, _ = d.sweepInputs(context.WithoutCancel(ctx))
		if err != nil {
			return nil, errors.Join(err, rbErr)
		}
		return res, rbErr
	}
	fault(FaultBeforeCommit)
	if err := tx.Commit(); err != nil {
		_, _ = d.sweepInputs(context.WithoutCancel(ctx))
		return nil, fmt.Errorf("commit erasure: %w", err)
	}
	fault(FaultAfterCommit)
	// The old files held the subject; they go once nothing refers to them.
	// One that cannot be deleted now is deleted by the next open for
	// writing: the erasure is committed either way.
	for _, p := range stale {
		_ = os.Remove(p)
	}
	fault(FaultCheckpoint)
	_, _ = conn.ExecContext(context.WithoutCancel(ctx), "CHECKPOINT")
	fault(FaultAfterCheckpoint)
	return res, nil
}

func ignoreDone(err error) error {
	if errors.Is(err, sql.ErrTxDone) {
		return nil
	}
	return err
}

func (d *DB) eraseTx(ctx context.Context, tx *sql.Tx, j *job.Job, opts EraseOptions) (*EraseResult, []string, error) {
	keyCol, posCol := j.Pipeline.Key[0], j.Pipeline.Position
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
	if err := catalog.CheckOwners(ctx, tx, j, true); err != nil {
		return nil, nil, err
	}
	res := &EraseResult{Job: j.Name, Key: opts.Key, Parent: st.Snapshot, Snapshot: st.Snapshot + 1,
		Removed: map[string]int64{}, Inputs: []RewrittenInput{}}
	var maxPos sql.NullInt64
	seePos := func(p sql.NullInt64) {
		if p.Valid && (!maxPos.Valid || p.Int64 > maxPos.Int64) {
			maxPos = p
		}
	}
	found := false

	// Tables: the target, its history and the companions.
	tables, err := companionTables(ctx, tx, j, keyCol)
	if err != nil {
		return nil, nil, err
	}
	type place struct{ label, name string }
	places := []place{{j.Table, job.QuoteIdent(j.Table)}}
	if ok, err := catalog.TableExists(ctx, tx, "idem", j.Name+"__history"); err != nil {
		return nil, nil, err
	} else if ok {
		places = append(places, place{"history", catalog.HistoryTable(j.Name)})
	}
	for _, t := range tables {
		if t != j.Table {
			places = append(places, place{t, job.QuoteIdent(t)})
		}
	}
	for _, p := range places {
		cols, err := columnsOf(ctx, tx, p.name)
		if err != nil {
			return nil, nil, err
		}
		where := " WHERE CAST(" + job.QuoteIdent(keyCol) + " AS VARCHAR) = ?"
		if cols[posCol] {
			// A row's position counts only where the pipeline judged it
			// valid: a table that stores outcomes keeps invalid rows as
			// received ("1e18"), and their outcome says so.
			valid := ""
			if cols["outcome"] {
				valid = " AND coalesce(outcome NOT LIKE 'invalid%', false)"
			}
			var pos sql.NullInt64
			if err := tx.QueryRowContext(ctx, "SELECT max("+positionSQL("CAST("+job.QuoteIdent(posCol)+" AS VARCHAR)")+") FROM "+p.name+where+valid, opts.Key).Scan(&pos); err != nil {
				return nil, nil, fmt.Errorf("erase from %s: %w", p.label, catalog.TrimSQLError(err))
			}
			seePos(pos)
		}
		r, err := tx.ExecContext(ctx, "DELETE FROM "+p.name+where, opts.Key)
		if err != nil {
			return nil, nil, fmt.Errorf("erase from %s: %w", p.label, catalog.TrimSQLError(err))
		}
		n, _ := r.RowsAffected()
		res.Removed[p.label] = n
		found = found || n > 0
	}

	// Retained inputs of every snapshot of the job.
	snaps, err := catalog.ReadSnapshots(ctx, tx, j.Name, st.Snapshot)
	if err != nil {
		return nil, nil, err
	}
	rewritten := map[string]catalog.InputRef{}
	for _, s := range snaps {
		format := s.Inputs.Format
		if format == "" {
			format = j.Input.Format
		}
		for _, f := range s.Inputs.Files {
			if _, done := rewritten[f.SHA256]; done {
				continue
			}
			rw, pos, err := d.rewriteWithout(ctx, tx, f, format, keyFilter(keyCol, posCol, opts.Key))
			if err != nil {
				return nil, nil, err
			}
			// A retained input's rows carry no verdict; where the pipeline
			// stores every row's outcome, the position comes from there.
			if j.Pipeline.OutcomesTable == "" {
				seePos(pos)
			}
			if rw == nil {
				rewritten[f.SHA256] = f
				continue
			}
			found = true
			rewritten[f.SHA256] = catalog.InputRef{SHA256: rw.New, Bytes: rw.Bytes, Name: f.Name}
			res.Inputs = append(res.Inputs, *rw)
		}
	}
	if !found && !opts.Replay {
		prior, err := catalog.CountErasures(ctx, tx, j.Name, opts.Key)
		if err != nil {
			return nil, nil, err
		}
		if prior > 0 {
			// Erasing again finds nothing: the first erasure stands.
			res.AlreadyErased = true
			res.Snapshot = st.Snapshot
			return res, nil, nil
		}
		return nil, nil, fmt.Errorf("erase %s from job %s: the key is in no row, snapshot or retained input; nothing committed", opts.Key, j.Name)
	}
	if opts.Position != nil {
		maxPos = sql.NullInt64{Int64: *opts.Position, Valid: true}
	}
	if maxPos.Valid {
		res.Position = &maxPos.Int64
	}

	// Point every snapshot row at the rewritten files.
	var stale []string
	if len(res.Inputs) > 0 {
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
				return nil, nil, fmt.Errorf("erase: update inputs of snapshot %d: %w", s.Snapshot, err)
			}
		}
		for _, rw := range res.Inputs {
			if err := catalog.RecordInput(ctx, tx, rw.New, rw.Bytes); err != nil {
				return nil, nil, fmt.Errorf("erase: record input: %w", err)
			}
			refs, err := catalog.InputReferences(ctx, tx, rw.Old)
			if err != nil {
				return nil, nil, fmt.Errorf("erase: count references to input: %w", err)
			}
			if refs == 0 {
				if err := catalog.ForgetInput(ctx, tx, rw.Old); err != nil {
					return nil, nil, fmt.Errorf("erase: forget input: %w", err)
				}
				stale = append(stale, retainedPath(d.path, rw.Old))
			}
		}
	}

	// The erasure and its snapshot.
	if err := catalog.RecordErasure(ctx, tx, j.Name, opts.Key, res.Position, res.Snapshot); err != nil {
		return nil, nil, err
	}
	if err := catalog.WriteSnapshotOnly(ctx, tx, j, st, res.Snapshot, job.KindErase, catalog.SnapshotInputs{Files: []catalog.InputRef{}}, st.Key, st.PartsJSON()); err != nil {
		return nil, nil, err
	}
	return res, stale, nil
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

// rowFilter picks the rows of a retained input to drop: by key text and
// position in Go (csv, jsonl), by a SQL condition for parquet.
type rowFilter struct {
	keyCol, posCol string
	drop           func(key string, pos sql.NullInt64) bool
	dropSQL        string
}

// keyFilter drops every row of one key.
func keyFilter(keyCol, posCol, key string) rowFilter {
	return rowFilter{
		keyCol: keyCol, posCol: posCol,
		drop:    func(k string, _ sql.NullInt64) bool { return k == key },
		dropSQL: "CAST(" + job.QuoteIdent(keyCol) + " AS VARCHAR) = " + job.SQLString(key),
	}
}

// rewriteWithout writes a copy of a retained input without the rows the
// filter drops and stores it under its sha256. It returns nil when the file
// holds no such row, and the highest position of the dropped rows. Kept rows
// keep their bytes (csv, jsonl).
func (d *DB) rewriteWithout(ctx context.Context, tx *sql.Tx, f catalog.InputRef, format string, flt rowFilter) (*RewrittenInput, sql.NullInt64, error) {
	src := retainedPath(d.path, f.SHA256)
	var pos sql.NullInt64
	if _, err := os.Stat(src); err != nil {
		return nil, pos, fmt.Errorf("erase: retained input %s (%s): %w", f.Name, f.SHA256[:12], err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(src), tempPrefix+"erase-*")
	if err != nil {
		return nil, pos, fmt.Errorf("erase: %w", err)
	}
	tmpName := tmp.Name()
	defer os.Remove(tmpName)
	var removed int64
	switch format {
	case job.FormatJSONL:
		removed, pos, err = filterJSONL(src, tmp, flt)
	case job.FormatCSV:
		removed, pos, err = filterCSV(src, tmp, flt)
	case job.FormatParquet:
		tmp.Close()
		removed, pos, err = filterParquet(ctx, tx, src, tmpName, flt)
	default:
		err = fmt.Errorf("unknown input format %q", format)
	}
	if format != job.FormatParquet {
		if cerr := tmp.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		return nil, pos, fmt.Errorf("erase: rewrite retained input %s (%s): %w", f.Name, f.SHA256[:12], err)
	}
	if removed == 0 {
		return nil, pos, nil
	}
	sum, size, err := fileSHA256(tmpName)
	if err != nil {
		return nil, pos, fmt.Errorf("erase: %w", err)
	}
	dst := retainedPath(d.path, sum)
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return nil, pos, fmt.Errorf("erase: %w", err)
	}
	if err := syncFile(tmpName); err != nil {
		return nil, pos, fmt.Errorf("erase: %w", err)
	}
	if err := os.Rename(tmpName, dst); err != nil {
		return nil, pos, fmt.Errorf("erase: %w", err)
	}
	return &RewrittenInput{Old: f.SHA256, New: sum, Bytes: size, RowsRemoved: removed}, pos, nil
}

func syncFile(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}

// jsonText is a JSON scalar as DuckDB reads it into VARCHAR: a string's
// text, a number's literal. ok is false for null, a missing field, objects
// and arrays.
func jsonText(raw json.RawMessage) (string, bool) {
	t := bytes.TrimSpace(raw)
	if len(t) == 0 || string(t) == "null" || t[0] == '{' || t[0] == '[' {
		return "", false
	}
	if t[0] == '"' {
		var s string
		if json.Unmarshal(t, &s) != nil {
			return "", false
		}
		return s, true
	}
	return string(t), true
}

func filterJSONL(src string, out io.Writer, flt rowFilter) (int64, sql.NullInt64, error) {
	var pos sql.NullInt64
	in, err := os.Open(src)
	if err != nil {
		return 0, pos, err
	}
	defer in.Close()
	r := bufio.NewReaderSize(in, 1<<20)
	w := bufio.NewWriterSize(out, 1<<20)
	var removed int64
	for {
		line, rerr := r.ReadBytes('\n')
		if len(line) > 0 {
			drop := false
			if t := bytes.TrimSpace(line); len(t) > 0 {
				var obj map[string]json.RawMessage
				if err := json.Unmarshal(t, &obj); err != nil {
					return 0, pos, err
				}
				if k, ok := jsonText(obj[flt.keyCol]); ok {
					var p sql.NullInt64
					if text, ok := jsonText(obj[flt.posCol]); ok {
						p = parsePosition(text)
					}
					if flt.drop(k, p) {
						drop = true
						pos = maxPosition(pos, p)
					}
				}
			}
			if drop {
				removed++
			} else if _, err := w.Write(line); err != nil {
				return 0, pos, err
			}
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			return 0, pos, rerr
		}
	}
	return removed, pos, w.Flush()
}

func filterCSV(src string, out io.Writer, flt rowFilter) (int64, sql.NullInt64, error) {
	var pos sql.NullInt64
	data, err := os.ReadFile(src)
	if err != nil {
		return 0, pos, err
	}
	if len(data) == 0 {
		return 0, pos, nil
	}
	r := csv.NewReader(bytes.NewReader(data))
	r.FieldsPerRecord = -1
	header, err := r.Read()
	if err != nil {
		return 0, pos, err
	}
	keyIdx, posIdx := -1, -1
	for i, h := range header {
		h = strings.TrimSpace(strings.TrimPrefix(h, "\ufeff"))
		switch h {
		case flt.keyCol:
			keyIdx = i
		case flt.posCol:
			posIdx = i
		}
	}
	if keyIdx < 0 {
		return 0, pos, fmt.Errorf("no column %s in the header", flt.keyCol)
	}
	start := r.InputOffset()
	w := bufio.NewWriter(out)
	if _, err := w.Write(data[:start]); err != nil {
		return 0, pos, err
	}
	var removed int64
	for {
		rec, err := r.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			return 0, pos, err
		}
		end := r.InputOffset()
		var p sql.NullInt64
		if posIdx >= 0 && posIdx < len(rec) {
			p = parsePosition(rec[posIdx])
		}
		if keyIdx < len(rec) && flt.drop(rec[keyIdx], p) {
			removed++
			pos = maxPosition(pos, p)
		} else if _, err := w.Write(data[start:end]); err != nil {
			return 0, pos, err
		}
		start = end
	}
	if _, err := w.Write(data[start:]); err != nil {
		return 0, pos, err
	}
	return removed, pos, w.Flush()
}

func filterParquet(ctx context.Context, tx *sql.Tx, src, dst string, flt rowFilter) (int64, sql.NullInt64, error) {
	var pos sql.NullInt64
	var removed int64
	read := "read_parquet(" + job.SQLString(src) + ")"
	match := flt.dropSQL
	if err := tx.QueryRowContext(ctx, "SELECT count(*), max("+positionSQL("CAST("+job.QuoteIdent(flt.posCol)+" AS VARCHAR)")+") FROM "+read+" WHERE "+match).Scan(&removed, &pos); err != nil {
		return 0, pos, catalog.TrimSQLError(err)
	}
	if removed == 0 {
		return 0, pos, nil
	}
	if _, err := tx.ExecContext(ctx, "COPY (SELECT * FROM "+read+" WHERE NOT coalesce("+match+", false)) TO "+job.SQLString(dst)+" (FORMAT parquet)"); err != nil {
		return 0, pos, catalog.TrimSQLError(err)
	}
	return removed, pos, nil
}

// positionPattern is the one rule by which idem reads a position from text,
// in Go (parsePosition) and in SQL (positionSQL), as the versioned_changes
// stage step reads source_version: decimal digits with an optional leading
// '+' and surrounding ASCII white space, fitting a BIGINT. 1e18, 7_000,
// "\u00a0 999" and ++888 are not positions (a bare TRY_CAST takes some).
// It is RE2 syntax, read alike by Go's regexp and DuckDB's regexp_full_match.
// A pipeline whose stage rule is stricter (orders: digits only) accepts a
// subset, with the same values.
const (
	positionPattern = `[ \t\n\v\f\r]*\+?[0-9]+[ \t\n\v\f\r]*`
	positionStrip   = `[ \t\n\v\f\r+]`
)

var (
	positionRE      = regexp.MustCompile(`^(?:` + positionPattern + `)$`)
	positionStripRE = regexp.MustCompile(positionStrip)
)

// parsePosition reads a position by positionPattern; not one is NULL.
func parsePosition(text string) sql.NullInt64 {
	if !positionRE.MatchString(text) {
		return sql.NullInt64{}
	}
	n, err := strconv.ParseInt(positionStripRE.ReplaceAllString(text, ""), 10, 64)
	if err != nil {
		return sql.NullInt64{}
	}
	return sql.NullInt64{Int64: n, Valid: true}
}

// positionSQL is parsePosition as a DuckDB expression over the VARCHAR
// expression text: a BIGINT, or NULL.
func positionSQL(text string) string {
	return "CASE WHEN regexp_full_match(" + text + ", " + job.SQLString(positionPattern) + ") THEN TRY_CAST(regexp_replace(" +
		text + ", " + job.SQLString(positionStrip) + ", '', 'g') AS BIGINT) END"
}

func maxPosition(a, b sql.NullInt64) sql.NullInt64 {
	if b.Valid && (!a.Valid || b.Int64 > a.Int64) {
		return b
	}
	return a
}
