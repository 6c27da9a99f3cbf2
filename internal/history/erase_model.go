package history

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/idem-dev/idem/internal/catalog"
	"github.com/idem-dev/idem/internal/export"
	"github.com/idem-dev/idem/internal/job"
	"github.com/idem-dev/idem/internal/jobkey"
	"github.com/idem-dev/idem/internal/report"
	"github.com/idem-dev/idem/internal/run"
	"github.com/idem-dev/idem/internal/seal"
	"github.com/idem-dev/idem/internal/sqltext"
)

// recomputeModel rebuilds model j inside an erasure's transaction tx, for
// every kept snapshot, from its upstreams' rows at the snapshots that
// snapshot pinned: read from their histories, which the erasure has
// already rid of the subject, in the order a run reads them (ORDER BY ALL,
// one thread), with the model version the snapshot was built with. Its
// history is rebuilt from those rows and its target holds the latest; a
// new snapshot of kind erase records the change. A model none of whose
// kept snapshots changes is left as it is (nil). Its checkpoints, which
// hold the old rows, go.
func recomputeModel(ctx context.Context, d *run.DB, tx *sql.Tx, j *job.Job, fault func(string)) (*RecomputeResult, error) {
	st, err := catalog.ReadState(ctx, tx, j.Name)
	if err != nil {
		return nil, err
	}
	if st.Snapshot == 0 {
		return nil, nil
	}
	if err := st.CheckIdentity(j); err != nil {
		return nil, err
	}
	ret, err := catalog.ReadRetention(ctx, tx, j.Name)
	if err != nil {
		return nil, err
	}
	snaps, err := catalog.ReadSnapshots(ctx, tx, j.Name, st.Snapshot)
	if err != nil {
		return nil, err
	}
	cols, err := catalog.TargetColumns(ctx, tx, j.Table)
	if err != nil {
		return nil, err
	}
	bySnap := map[int64]*catalog.SnapshotRow{}
	for _, s := range snaps {
		bySnap[s.Snapshot] = s
	}
	restore, err := d.SingleThread(ctx, tx)
	if err != nil {
		return nil, err
	}
	defer restore()
	// The recomputed rows of every kept snapshot go to one table with the
	// history's columns: each version's own columns, a column it lacks
	// NULL, a retyped one as the history keeps it (text).
	hcols, err := catalog.TargetColumnsIn(ctx, tx, "idem", j.Name+"__history")
	if err != nil {
		return nil, err
	}
	hcols = slices.DeleteFunc(hcols, func(c catalog.TargetColumn) bool { return c.Name == "idem_from" || c.Name == "idem_to" })
	if len(hcols) == 0 {
		return nil, fmt.Errorf("recompute %s: it has no history", j.Name)
	}
	defs := make([]string, len(hcols))
	hnames := make([]string, len(hcols))
	for i, c := range hcols {
		defs[i], hnames[i] = sqltext.QuoteIdent(c.Name)+" "+c.Type, c.Name
	}
	const all = "idem_recomputed"
	if _, err := tx.ExecContext(ctx, "CREATE OR REPLACE TEMP TABLE "+all+" (idem_snap BIGINT, "+strings.Join(defs, ", ")+")"); err != nil {
		return nil, fmt.Errorf("recompute %s: %w", j.Name, catalog.TrimSQLError(err))
	}
	list := export.IdentList(hnames)
	res := &RecomputeResult{Job: j.Name, Parent: st.Snapshot, Snapshot: st.Snapshot + 1}
	computed := map[int64]bool{} // run snapshots whose rows are in all
	changed := false
	for s := ret.OldestKept; s <= st.Snapshot; s++ {
		row := bySnap[s]
		if row == nil {
			return nil, fmt.Errorf("recompute %s: snapshot %d has no snapshot row", j.Name, s)
		}
		src, err := sourceRun(bySnap, s)
		if err != nil {
			return nil, fmt.Errorf("recompute %s: %w", j.Name, err)
		}
		if !computed[src] {
			if err := modelRows(ctx, tx, j, bySnap[src], all, hcols); err != nil {
				return nil, err
			}
			computed[src] = true
		}
		if _, err := tx.ExecContext(ctx, fmt.Sprintf("INSERT INTO %s SELECT %d, %s FROM %s WHERE idem_snap = %d", all, s, list, all, -src)); err != nil {
			return nil, fmt.Errorf("recompute %s: %w", j.Name, catalog.TrimSQLError(err))
		}
		pinned, err := catalog.PinnedSelect(ctx, tx, j.Name, row.Columns, s)
		if err != nil {
			return nil, err
		}
		var before, after, differ int64
		now := fmt.Sprintf("SELECT %s FROM %s WHERE idem_snap = %d", readBack(row.Columns, hcols), all, s)
		if err := tx.QueryRowContext(ctx, "SELECT (SELECT count(*) FROM ("+pinned+")), (SELECT count(*) FROM ("+now+")), (SELECT count(*) FROM (("+pinned+" EXCEPT ALL "+now+") UNION ALL ("+now+" EXCEPT ALL "+pinned+")))").Scan(&before, &after, &differ); err != nil {
			return nil, fmt.Errorf("recompute %s: compare snapshot %d: %w", j.Name, s, catalog.TrimSQLError(err))
		}
		changed = changed || differ > 0
		res.Snapshots = append(res.Snapshots, RecomputeSnapshot{Snapshot: s, RowsBefore: before, RowsAfter: after, differs: differ > 0})
	}
	if !changed {
		_, err := tx.ExecContext(ctx, "DROP TABLE "+all)
		return nil, err
	}
	if _, err := tx.ExecContext(ctx, "DELETE FROM "+all+" WHERE idem_snap < 0"); err != nil {
		return nil, err
	}
	if err := catalog.RebuildHistory(ctx, tx, j.Name, hcols, all, st.Snapshot); err != nil {
		return nil, err
	}
	target := sqltext.QuoteIdent(j.Table)
	names := make([]string, len(cols))
	for i, c := range cols {
		names[i] = c.Name
	}
	order := export.IdentList(names)
	if key := report.NonNil(j.Key); len(key) > 0 {
		order = export.IdentList(key)
	}
	for _, q := range []string{
		"DELETE FROM " + target,
		fmt.Sprintf("INSERT INTO %s (%s) SELECT %s FROM %s WHERE idem_snap = %d ORDER BY %s", target, export.IdentList(names), readBack(cols, hcols), all, st.Snapshot, order),
		"DROP TABLE " + all,
	} {
		if _, err := tx.ExecContext(ctx, q); err != nil {
			return nil, fmt.Errorf("recompute %s: %w", j.Name, catalog.TrimSQLError(err))
		}
	}
	for _, s := range res.Snapshots {
		if err := recountModelSnapshot(ctx, tx, j.Name, bySnap[s.Snapshot], s.RowsAfter); err != nil {
			return nil, err
		}
	}
	cps, err := catalog.Checkpoints(ctx, tx, j.Name)
	if err != nil {
		return nil, err
	}
	if err := forgetCheckpoints(ctx, tx, j, cps); err != nil {
		return nil, err
	}
	key, parts, err := repinErased(ctx, tx, st)
	if err != nil {
		return nil, err
	}
	if err := catalog.WriteSnapshotOnly(ctx, tx, j, st, res.Snapshot, report.KindErase, catalog.SnapshotInputs{Files: []catalog.InputRef{}}, key, parts); err != nil {
		return nil, err
	}
	if _, err := run.WriteCheckpoint(ctx, d, tx, j, res.Snapshot, fault); err != nil {
		return nil, err
	}
	return res, nil
}

// repinErased is the job key and parts of a recomputed model's new
// snapshot: its latest's, with each upstream pin that this erasure moved
// (the upstream's latest is the erasure right after the pinned snapshot)
// moved with it, since the rows are those of the upstream's new snapshot.
// The next run then finds nothing new. A pin the model was behind on stays.
func repinErased(ctx context.Context, tx *sql.Tx, st catalog.State) (string, string, error) {
	if !st.HasParts || len(st.Parts.Upstream) == 0 {
		return st.Key, st.PartsJSON(), nil
	}
	parts := st.Parts
	parts.Upstream = slices.Clone(parts.Upstream)
	moved := false
	for i, ref := range parts.Upstream {
		ust, err := catalog.ReadState(ctx, tx, ref.Job)
		if err != nil {
			return "", "", err
		}
		if ust.Snapshot != ref.Snapshot+1 {
			continue
		}
		row, err := catalog.ReadSnapshot(ctx, tx, ref.Job, ust.Snapshot)
		if err != nil {
			return "", "", err
		}
		if row.Kind == report.KindErase && row.Parent == ref.Snapshot {
			parts.Upstream[i] = jobkey.UpstreamRef{Job: ref.Job, Snapshot: ust.Snapshot, JobKey: ust.Key}
			moved = true
		}
	}
	if !moved {
		return st.Key, st.PartsJSON(), nil
	}
	return parts.Key(), parts.JSON(), nil
}

// sourceRun is the run snapshot whose rows snapshot s holds: s itself for
// a run, the one before for an erasure, the restored one's for a rollback.
func sourceRun(bySnap map[int64]*catalog.SnapshotRow, s int64) (int64, error) {
	for range len(bySnap) + 1 {
		row := bySnap[s]
		if row == nil {
			return 0, fmt.Errorf("snapshot %d has no snapshot row", s)
		}
		switch row.Kind {
		case report.KindErase:
			s = row.Parent
		case report.KindRollback:
			if row.Inputs.RollbackTo == nil {
				return 0, fmt.Errorf("snapshot %d is a rollback without a target snapshot", s)
			}
			s = *row.Inputs.RollbackTo
		default:
			return s, nil
		}
	}
	return 0, fmt.Errorf("snapshot %d: erasures and rollbacks lead to no run", s)
}

// modelRows appends to table all (of columns hcols), with idem_snap =
// -row.Snapshot, the rows model j gives over the upstream rows row pinned,
// with the columns the snapshot recorded put where hcols has them.
func modelRows(ctx context.Context, tx *sql.Tx, j *job.Job, row *catalog.SnapshotRow, all string, hcols []catalog.TargetColumn) error {
	parts, err := row.Parts()
	if err != nil {
		return fmt.Errorf("recompute %s: snapshot %d: %w", j.Name, row.Snapshot, err)
	}
	at, err := ModelAt(ctx, tx, j, row, parts)
	if err != nil {
		return err
	}
	for _, ref := range parts.Upstream {
		if err := catalog.CheckNotExpired(ctx, tx, ref.Job, ref.Snapshot); err != nil {
			return fmt.Errorf("erase: model %s cannot be recomputed for its snapshot %d, which read %s at snapshot %d: %w", j.Name, row.Snapshot, ref.Job, ref.Snapshot, err)
		}
		up, err := catalog.ReadSnapshot(ctx, tx, ref.Job, ref.Snapshot)
		if err != nil {
			return err
		}
		pinned, err := catalog.PinnedSelect(ctx, tx, ref.Job, up.Columns, ref.Snapshot)
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, "CREATE OR REPLACE TEMP TABLE "+sqltext.QuoteIdent(seal.UpstreamRelation(ref.Job))+" AS SELECT * FROM ("+pinned+") ORDER BY ALL"); err != nil {
			return fmt.Errorf("recompute %s: upstream %s at snapshot %d: %w", j.Name, ref.Job, ref.Snapshot, catalog.TrimSQLError(err))
		}
	}
	model := at.Expand(at.ModelSQL)
	have := map[string]bool{}
	for _, c := range row.Columns {
		have[c.Name] = true
	}
	sel := make([]string, len(hcols))
	for i, c := range hcols {
		sel[i] = "NULL"
		if have[c.Name] {
			sel[i] = "CAST(" + sqltext.QuoteIdent(c.Name) + " AS " + c.Type + ")"
		}
	}
	insert := fmt.Sprintf("INSERT INTO %s SELECT %d, %s FROM (%s\n) AS idem_model", all, -row.Snapshot, strings.Join(sel, ", "), model)
	if err := run.OneStatement(insert); err != nil {
		return fmt.Errorf("recompute %s for snapshot %d: %w", j.Name, row.Snapshot, err)
	}
	// The macros the model calls, for this statement alone (run.CreateMacros).
	if err := run.CreateMacros(ctx, tx, at); err != nil {
		return fmt.Errorf("recompute %s for snapshot %d: %w", j.Name, row.Snapshot, err)
	}
	if _, err := tx.ExecContext(ctx, insert); err != nil {
		return fmt.Errorf("recompute %s for snapshot %d: %w", j.Name, row.Snapshot, catalog.TrimSQLError(err))
	}
	return run.DropMacros(ctx, tx, at)
}

// recountModelSnapshot records a recomputed model snapshot's rows: a run's
// rows in, rows out and outcomes (every row of a model is accepted); an
// erasure's or rollback's rows out.
func recountModelSnapshot(ctx context.Context, tx *sql.Tx, name string, row *catalog.SnapshotRow, rows int64) error {
	q, args := `UPDATE idem.snapshots SET rows_out = ? WHERE job = ? AND snapshot = ?`, []any{rows, name, row.Snapshot}
	if row.Kind != report.KindErase && row.Kind != report.KindRollback {
		outcomes, err := json.Marshal(map[string]int64{"accepted": rows})
		if err != nil {
			return err
		}
		q, args = `UPDATE idem.snapshots SET rows_in = ?, rows_out = ?, outcomes = ? WHERE job = ? AND snapshot = ?`, []any{rows, rows, string(outcomes), name, row.Snapshot}
	}
	if _, err := tx.ExecContext(ctx, q, args...); err != nil {
		return fmt.Errorf("recount snapshot %d of %s: %w", row.Snapshot, name, catalog.TrimSQLError(err))
	}
	return nil
}

// readBack is catalog.ReadBack's select list alone.
func readBack(cols, hcols []catalog.TargetColumn) string {
	sel, _ := catalog.ReadBack(cols, hcols)
	return sel
}
