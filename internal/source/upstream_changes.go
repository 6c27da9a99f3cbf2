package source

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"

	"github.com/idem-dev/idem/internal/catalog"
	"github.com/idem-dev/idem/internal/report"
	"github.com/idem-dev/idem/internal/seal"
	"github.com/idem-dev/idem/internal/sqltext"
)

// Range is the part of one upstream's history an apply run reads: the rows
// that changed after snapshot From (0: none yet pinned) up to To.
type Range struct {
	Job      string
	From, To int64
}

// String reads "trips_clean:4-5".
func (r Range) String() string { return fmt.Sprintf("%s:%d-%d", r.Job, r.From, r.To) }

// Ranges are the ranges Pin read, by upstream job name.
func (u *Upstream) Ranges() []Range { return slices.Clone(u.ranges) }

// OpColumn is the column of an apply pipeline's upstream input that says
// what changed: 'upsert' or 'delete'.
const OpColumn = "idem_op"

// pinChanges makes {{upstream:name}} a temp table of the rows of upstream
// name that changed between the snapshot the job pinned last (Since) and
// snapshot to, read from the upstream's history (catalog.ChangesSelect).
// The upstream's key is the one its snapshot recorded, or its job's [target]
// key (a model's). An upstream below the snapshot the job pinned is refused:
// its history no longer leads from what the job applied.
func (u *Upstream) pinChanges(ctx context.Context, tx *sql.Tx, name string, to int64) error {
	from := u.Since[name]
	if to < from {
		return report.Refuse("upstream", "job %s applied upstream %s up to snapshot %d, but %s is now at snapshot %d: its history does not lead on from what %s applied",
			u.Job.Name, name, from, name, to, u.Job.Name)
	}
	// Expiry keeps the snapshot a downstream pinned (catalog.DownstreamPins);
	// should it be gone all the same, no changes are read from a pruned
	// history.
	if from > 0 {
		if err := catalog.CheckNotExpired(ctx, tx, name, from); err != nil {
			return err
		}
		back, err := u.rolledBackBelow(ctx, tx, name, from, to)
		if err != nil {
			return err
		}
		if back != "" {
			u.realign = append(u.realign, name)
			u.notes = append(u.notes, back)
		}
	}
	row, err := catalog.ReadSnapshot(ctx, tx, name, to)
	if err != nil {
		return err
	}
	changes, err := catalog.ChangesSelect(ctx, tx, name, row.Columns, ChangesKey(row), from, to)
	if err != nil {
		return err
	}
	if err := relation(ctx, tx, name, "TABLE", changes); err != nil {
		return err
	}
	u.ranges = append(u.ranges, Range{Job: name, From: from, To: to})
	if u.columns == nil {
		u.columns = map[string][]catalog.TargetColumn{}
	}
	u.columns[name] = row.Columns
	return nil
}

// ChangesKey is the key the changes of an upstream at snapshot row are
// read by: the key its snapshot recorded, or its job's [target] key (a
// model's, in its config part).
func ChangesKey(row *catalog.SnapshotRow) []string {
	if len(row.KeyColumns) > 0 {
		return row.KeyColumns
	}
	return configKey(row)
}

// configKey is the [target] key a snapshot's config part recorded (a
// model's, or a generic pipeline's), or nil.
func configKey(row *catalog.SnapshotRow) []string {
	parts, err := row.Parts()
	if err != nil {
		return nil
	}
	list, _ := parts.Config["key"].([]any)
	var key []string
	for _, k := range list {
		s, ok := k.(string)
		if !ok {
			return nil
		}
		key = append(key, s)
	}
	return key
}

// stageChanges makes view input, which a generic pipeline's steps read,
// hold the changed rows of the job's one upstream: its declared columns, as
// the upstream stores them (the stage step casts them, as for Parquet
// files), and idem_op. A declared column the upstream does not have is a
// usage error naming the upstream's columns.
func (u *Upstream) stageChanges(ctx context.Context, tx *sql.Tx) error {
	name := u.Job.Input.Upstream[0]
	have := map[string]bool{}
	var names []string
	for _, c := range u.columns[name] {
		have[c.Name] = true
		names = append(names, c.Name)
	}
	list := make([]string, 0, len(u.Job.Columns)+1)
	for _, c := range u.Job.Columns {
		if !have[c.Name] {
			return report.Usage("job %s: [input.columns] %s is not a column of upstream %s (it has %s)", u.Job.Name, c.Name, name, strings.Join(names, ", "))
		}
		list = append(list, sqltext.QuoteIdent(c.Name))
	}
	list = append(list, sqltext.QuoteIdent(OpColumn))
	q := "CREATE OR REPLACE TEMP VIEW input AS SELECT " + strings.Join(list, ", ") + " FROM temp." + sqltext.QuoteIdent(seal.UpstreamRelation(name))
	if _, err := tx.ExecContext(ctx, q); err != nil {
		return fmt.Errorf("stage upstream %s: %w", name, catalog.TrimSQLError(err))
	}
	return nil
}

// rolledBackBelow says, for the run log, whether upstream name was rolled
// back between snapshot from and snapshot to to a snapshot below from
// ("" when not). Its changes then go backwards (older versions, rows back
// from the dead), which the job's pipeline would keep as stale; the run
// realigns the job instead (Realign): the rows of the keys those changes
// name are taken from the upstream as it is now.
func (u *Upstream) rolledBackBelow(ctx context.Context, tx *sql.Tx, name string, from, to int64) (string, error) {
	rows, err := catalog.ReadSnapshots(ctx, tx, name, to)
	if err != nil {
		return "", err
	}
	for _, r := range rows {
		if r.Snapshot <= from || r.Kind != report.KindRollback || r.Inputs.RollbackTo == nil || *r.Inputs.RollbackTo >= from {
			continue
		}
		return fmt.Sprintf("upstream %s was rolled back to snapshot %d (its snapshot %d), below snapshot %d that this job applied: the rows of the keys it changed since were taken as %s has them, not kept as newer",
			name, *r.Inputs.RollbackTo, r.Snapshot, from, name), nil
	}
	return "", nil
}

// Realigned are the upstreams whose changes this run took over the job's
// newer rows (an upstream rolled back below what the job applied), and
// the run log's note of each.
func (u *Upstream) Realigned() ([]string, string) {
	return slices.Clone(u.realign), strings.Join(u.notes, "; ")
}

// realignKeys removes, before the job's steps, its target's rows and
// tombstones of every key the changes of a realigned upstream name, so
// that the pipeline applies the upstream's rows as they are now instead of
// keeping its newer ones as stale (or a tombstone holding a key the
// upstream brought back).
func (u *Upstream) realignKeys(ctx context.Context, tx *sql.Tx) error {
	if len(u.realign) == 0 {
		return nil
	}
	keys := u.Job.Pipeline.Key
	if len(keys) == 0 {
		keys = u.Job.Key
	}
	if len(keys) == 0 {
		return report.Usage("job %s: upstream %s was rolled back below what the job applied, and the job has no key to realign its rows by", u.Job.Name, u.realign[0])
	}
	conds := make([]string, len(keys))
	for i, k := range keys {
		conds[i] = "c." + sqltext.QuoteIdent(k) + " IS NOT DISTINCT FROM t." + sqltext.QuoteIdent(k)
	}
	for _, name := range u.realign {
		where := "EXISTS (SELECT 1 FROM temp." + sqltext.QuoteIdent(seal.UpstreamRelation(name)) + " AS c WHERE " + strings.Join(conds, " AND ") + ")"
		if err := catalog.DeleteKeyedRows(ctx, tx, u.Job.Table, keys, where); err != nil {
			return fmt.Errorf("realign with upstream %s: %w", name, err)
		}
	}
	return nil
}
