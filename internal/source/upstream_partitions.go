package source

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"

	"github.com/idem-dev/idem/internal/catalog"
	"github.com/idem-dev/idem/internal/job"
)

// PartitionsTable is the temp table of the partitions an incremental
// model's run recomputes (one column v, of the partition column's type).
const PartitionsTable = "idem_incr_parts"

// Partitions restricts the upstream relations of an incremental model
// ([target] incremental = "partition") to the partitions whose upstream
// rows changed after the snapshots Since (the ones the model's state
// pinned) up to the ones Pin pins: each upstream's changed rows, old and
// new, are read from its history (catalog.ChangesSelect without a key, so
// an update that moves a row names both partitions), and their values of
// Column are the partitions. When that cannot be known from history, Pin
// reads every row and says why in Fallback; so does a Partitions without
// a Column.
type Partitions struct {
	Column string
	Since  map[string]int64

	// Set by Pin.
	Restricted bool     // the relations hold only the changed partitions
	Values     []string // the changed partitions, as text, in order
	Fallback   string   // why the relations hold every row
}

// pinPartitions finds the changed partitions of the upstreams in states
// (by name) and fills temp table PartitionsTable, or records why not.
func (u *Upstream) pinPartitions(ctx context.Context, tx *sql.Tx, states map[string]catalog.State) error {
	p := u.Partitions
	p.Restricted, p.Values, p.Fallback = false, nil, ""
	typ := ""
	type span struct {
		name     string
		from, to int64
		cols     []catalog.TargetColumn
	}
	var moved []span
	for _, name := range u.Job.SortedUpstream() {
		st := states[name]
		row, err := catalog.ReadSnapshot(ctx, tx, name, st.Snapshot)
		if err != nil {
			return err
		}
		ct := ""
		for _, c := range row.Columns {
			if strings.EqualFold(c.Name, p.Column) {
				ct = c.Type
			}
		}
		if ct == "" {
			return job.Usage("job %s: [target] partition_by = %q must be a column of every upstream, read as is (incremental = %q); upstream %s has none (columns: %s)",
				u.Job.Name, p.Column, job.IncrementalPartition, name, columnNames(row.Columns))
		}
		switch {
		case typ == "":
			typ = ct
		case typ != ct:
			p.Fallback = fmt.Sprintf("the upstreams' %s columns have different types (%s, %s)", p.Column, typ, ct)
			return nil
		}
		from, ok := p.Since[name]
		switch {
		case !ok:
			p.Fallback = "upstream " + name + " was not read before"
			return nil
		case st.Snapshot < from:
			p.Fallback = fmt.Sprintf("upstream %s is at snapshot %d, below snapshot %d that the last run read", name, st.Snapshot, from)
			return nil
		case st.Snapshot == from:
			continue
		}
		if err := catalog.CheckNotExpired(ctx, tx, name, from); err != nil {
			p.Fallback = err.Error()
			return nil
		}
		back, err := u.rolledBackBelow(ctx, tx, name, from, st.Snapshot)
		if err != nil {
			return err
		}
		if back != "" {
			p.Fallback = fmt.Sprintf("upstream %s was rolled back below snapshot %d", name, from)
			return nil
		}
		prev, err := catalog.ReadSnapshot(ctx, tx, name, from)
		if err != nil {
			return err
		}
		if !slices.Equal(prev.Columns, row.Columns) {
			p.Fallback = fmt.Sprintf("upstream %s's columns changed between snapshots %d and %d", name, from, st.Snapshot)
			return nil
		}
		moved = append(moved, span{name, from, st.Snapshot, row.Columns})
	}
	col := job.QuoteIdent(p.Column)
	stmts := []string{"CREATE OR REPLACE TEMP TABLE " + PartitionsTable + " (v " + typ + ")"}
	for _, s := range moved {
		changes, err := catalog.ChangesSelect(ctx, tx, s.name, s.cols, nil, s.from, s.to)
		if err != nil {
			return err
		}
		// A row rewritten with the same values is both closed and new:
		// only what differs between the two snapshots names a partition.
		stmts = append(stmts, "CREATE OR REPLACE TEMP TABLE idem_incr_changes AS "+changes,
			"INSERT INTO "+PartitionsTable+" SELECT DISTINCT "+col+" FROM ("+
				"(SELECT * EXCLUDE (idem_op) FROM idem_incr_changes WHERE idem_op = 'upsert' EXCEPT ALL SELECT * EXCLUDE (idem_op) FROM idem_incr_changes WHERE idem_op = 'delete')"+
				" UNION ALL (SELECT * EXCLUDE (idem_op) FROM idem_incr_changes WHERE idem_op = 'delete' EXCEPT ALL SELECT * EXCLUDE (idem_op) FROM idem_incr_changes WHERE idem_op = 'upsert'))",
			"DROP TABLE idem_incr_changes")
	}
	stmts = append(stmts, "CREATE OR REPLACE TEMP TABLE "+PartitionsTable+" AS SELECT DISTINCT v FROM "+PartitionsTable+" ORDER BY v NULLS FIRST")
	for _, q := range stmts {
		if _, err := tx.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("changed partitions of job %s: %w", u.Job.Name, catalog.TrimSQLError(err))
		}
	}
	rows, err := tx.QueryContext(ctx, "SELECT CAST(v AS VARCHAR) FROM "+PartitionsTable+" ORDER BY v NULLS FIRST")
	if err != nil {
		return fmt.Errorf("changed partitions of job %s: %w", u.Job.Name, catalog.TrimSQLError(err))
	}
	defer rows.Close()
	values := []string{}
	for rows.Next() {
		var v sql.NullString
		if err := rows.Scan(&v); err != nil {
			return err
		}
		if !v.Valid {
			// A NULL partition is refused by a full rebuild, which must
			// then be the one to say so.
			p.Fallback = "a changed upstream row has no " + p.Column + " (NULL)"
			return rows.Close()
		}
		values = append(values, v.String)
	}
	if err := rows.Err(); err != nil {
		return err
	}
	p.Restricted, p.Values = true, values
	return nil
}

// partitionRelation is the query of upstream table target's rows in the
// changed partitions.
func (u *Upstream) partitionRelation(target string) string {
	return "SELECT * FROM main." + job.QuoteIdent(target) + " WHERE " + job.QuoteIdent(u.Partitions.Column) + " IN (SELECT v FROM temp." + PartitionsTable + ")"
}

func columnNames(cols []catalog.TargetColumn) string {
	names := make([]string, len(cols))
	for i, c := range cols {
		names[i] = c.Name
	}
	return strings.Join(names, ", ")
}
