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
// new, are read from its history (catalog.ChangedValuesSelect: an update
// that moves a row names both partitions), and their values of Column are
// the partitions. When that cannot be known from history, Pin
// reads every row and says why in Fallback; so does a Partitions without
// a Column.
type Partitions struct {
	Column string
	Since  map[string]int64

	// Set by Pin.
	Restricted bool     // the relations hold only the changed partitions
	Values     []string // the changed partitions, as text, in order
	Fallback   string   // why the relations hold every row
	typ        string   // Column's type
	null       bool     // a changed row has no partition (NULL)
}

// maxListed is the most partitions a restricted relation names as
// constants (DuckDB pushes the list into the scan); more are read from
// PartitionsTable.
const maxListed = 1000

// pinPartitions finds the changed partitions of the upstreams in states
// (by name) and fills temp table PartitionsTable, or records why not.
func (u *Upstream) pinPartitions(ctx context.Context, tx *sql.Tx, states map[string]catalog.State) error {
	p := u.Partitions
	p.Restricted, p.Values, p.Fallback, p.null = false, nil, "", false
	typ := ""
	type span struct {
		name     string
		from, to int64
		cols     []catalog.TargetColumn
		key      []string
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
		moved = append(moved, span{name, from, st.Snapshot, row.Columns, ChangesKey(row)})
	}
	stmts := []string{"CREATE OR REPLACE TEMP TABLE " + PartitionsTable + " (v " + typ + ")"}
	for _, s := range moved {
		changed, err := catalog.ChangedValuesSelect(ctx, tx, s.name, s.cols, s.key, p.Column, s.from, s.to)
		if err != nil {
			return err
		}
		stmts = append(stmts, "INSERT INTO "+PartitionsTable+" "+changed)
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
			// Upstream rows without a partition make only result rows
			// without one, which the model's key refuses: they are read
			// so that the run refuses them as a full rebuild would.
			p.null = true
			continue
		}
		values = append(values, v.String)
	}
	if err := rows.Err(); err != nil {
		return err
	}
	// Every partition the target holds changed: reading every row costs
	// less than restricting them to all partitions.
	var kept int64
	if len(values) > 0 {
		col := job.QuoteIdent(p.Column)
		if err := tx.QueryRowContext(ctx, "SELECT count(*) FROM (SELECT DISTINCT "+col+" FROM main."+job.QuoteIdent(u.Job.Table)+
			" WHERE "+col+" NOT IN (SELECT v FROM "+PartitionsTable+" WHERE v IS NOT NULL))").Scan(&kept); err != nil {
			return fmt.Errorf("changed partitions of job %s: %w", u.Job.Name, catalog.TrimSQLError(err))
		}
		if kept == 0 {
			p.Fallback = fmt.Sprintf("every partition changed (%d)", len(values))
			return nil
		}
	}
	p.Restricted, p.Values, p.typ = true, values, typ
	return nil
}

// partitionRelation is the query of upstream table target's rows in the
// changed partitions.
func (u *Upstream) partitionRelation(target string) string {
	p := u.Partitions
	in := "SELECT v FROM temp." + PartitionsTable
	if len(p.Values) <= maxListed {
		// The values were written as text from the column's type: read
		// back as that type they are the same values.
		in = "NULL"
		if len(p.Values) > 0 {
			vals := make([]string, len(p.Values))
			for i, v := range p.Values {
				vals[i] = "CAST(" + job.SQLString(v) + " AS " + p.typ + ")"
			}
			in = strings.Join(vals, ", ")
		}
	}
	where := job.QuoteIdent(p.Column) + " IN (" + in + ")"
	if p.null {
		where += " OR " + job.QuoteIdent(p.Column) + " IS NULL"
	}
	return "SELECT * FROM main." + job.QuoteIdent(target) + " WHERE " + where
}

func columnNames(cols []catalog.TargetColumn) string {
	names := make([]string, len(cols))
	for i, c := range cols {
		names[i] = c.Name
	}
	return strings.Join(names, ", ")
}
