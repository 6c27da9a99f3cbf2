package source

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"

	"github.com/idem-dev/idem/internal/catalog"
	"github.com/idem-dev/idem/internal/job"
	"github.com/idem-dev/idem/internal/report"
	"github.com/idem-dev/idem/internal/sqltext"
)

// PartitionsTable is the temp table of the partitions (or keys) an
// incremental model's run recomputes: one column of each of
// Partitions.Columns, named and typed as the upstreams' columns.
const PartitionsTable = "idem_incr_parts"

// Partitions restricts the upstream relations of an incremental model
// ([target] incremental = "partition", or "key") to the partitions (keys)
// whose upstream rows changed after the snapshots Since (the ones the
// model's state pinned) up to the ones Pin pins: each upstream's changed
// rows, old and new, are read from its history
// (catalog.ChangedValuesSelect: an update that moves a row names both
// partitions), and their values of Columns (partition_by, or the model's
// key columns with ByKey) are the partitions (keys). When that cannot be
// known from history, Pin reads every row and says why in Fallback; so
// does a Partitions without Columns.
type Partitions struct {
	Columns []string
	ByKey   bool
	Since   map[string]int64

	// Set by Pin.
	Restricted bool     // the relations hold only the changed partitions
	Count      int64    // how many partitions (keys) changed
	Values     []string // the changed partitions, as text, in order (by partition, or a key of one column: at most maxListed)
	Fallback   string   // why the relations hold every row
	types      []string // Columns' types
	null       bool     // a changed row has no partition (NULL)
	listed     bool     // Values holds every changed value (one column, at most maxListed)
}

// unit is "partition" or "key", for the notes.
func (p *Partitions) unit() string {
	if p.ByKey {
		return "key"
	}
	return "partition"
}

// maxListed is the most partitions (keys of one column) a restricted
// relation names as constants (DuckDB pushes the list into the scan);
// more are read from PartitionsTable.
const maxListed = 1000

// pinPartitions finds the changed partitions (keys) of the upstreams in
// states (by name) and fills temp table PartitionsTable, or records why
// not.
func (u *Upstream) pinPartitions(ctx context.Context, tx *sql.Tx, states map[string]catalog.State) error {
	p := u.Partitions
	p.Restricted, p.Count, p.Values, p.Fallback, p.null, p.listed = false, 0, nil, "", false, false
	var types []string
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
		ct := make([]string, len(p.Columns))
		for i, col := range p.Columns {
			for _, c := range row.Columns {
				if strings.EqualFold(c.Name, col) {
					ct[i] = c.Type
				}
			}
			if ct[i] != "" {
				continue
			}
			if p.ByKey {
				return report.Usage("job %s: key column %q must be a column of every upstream, read as is (incremental = %q); upstream %s has none (columns: %s)",
					u.Job.Name, col, job.IncrementalKey, name, columnNames(row.Columns))
			}
			return report.Usage("job %s: [target] partition_by = %q must be a column of every upstream, read as is (incremental = %q); upstream %s has none (columns: %s)",
				u.Job.Name, col, job.IncrementalPartition, name, columnNames(row.Columns))
		}
		switch {
		case types == nil:
			types = ct
		case !slices.Equal(types, ct):
			p.Fallback = fmt.Sprintf("the upstreams' %s columns have different types (%s; %s)", strings.Join(p.Columns, ", "), strings.Join(types, ", "), strings.Join(ct, ", "))
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
	quoted := make([]string, len(p.Columns))
	defs := make([]string, len(p.Columns))
	for i, c := range p.Columns {
		quoted[i] = sqltext.QuoteIdent(c)
		defs[i] = quoted[i] + " " + types[i]
	}
	list := strings.Join(quoted, ", ")
	stmts := []string{"CREATE OR REPLACE TEMP TABLE " + PartitionsTable + " (" + strings.Join(defs, ", ") + ")"}
	for _, s := range moved {
		changed, err := catalog.ChangedValuesSelect(ctx, tx, s.name, s.cols, p.Columns, s.from, s.to)
		if err != nil {
			return err
		}
		stmts = append(stmts, "INSERT INTO "+PartitionsTable+" "+changed)
	}
	if len(moved) > 1 {
		// Each upstream's values are distinct, not their union.
		stmts = append(stmts, "CREATE OR REPLACE TEMP TABLE "+PartitionsTable+" AS SELECT DISTINCT "+list+" FROM "+PartitionsTable)
	}
	for _, q := range stmts {
		if _, err := tx.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("changed %ss of job %s: %w", p.unit(), u.Job.Name, catalog.TrimSQLError(err))
		}
	}
	// A changed row with a NULL among Columns makes only result rows
	// without a partition (or with a NULL in the key), which the model's
	// key refuses: such rows are read too, so that the run refuses them as
	// a full rebuild would (or leaves them out, as its filters do).
	var total, nulls int64
	if err := tx.QueryRowContext(ctx, "SELECT count(*), count(*) FILTER (WHERE "+anyNull(quoted)+") FROM "+PartitionsTable).Scan(&total, &nulls); err != nil {
		return fmt.Errorf("changed %ss of job %s: %w", p.unit(), u.Job.Name, catalog.TrimSQLError(err))
	}
	values := []string{}
	if len(p.Columns) == 1 && (!p.ByKey || total-nulls <= maxListed) {
		var err error
		if values, err = u.changedValues(ctx, tx); err != nil {
			return err
		}
		p.listed = len(values) <= maxListed
	}
	p.null = nulls > 0
	if p.ByKey {
		p.Count = total
	} else {
		p.Count = int64(len(values))
	}
	if p.Count > 0 {
		if why, err := u.everyChanged(ctx, tx, quoted); err != nil || why != "" {
			p.Fallback = why
			return err
		}
	}
	p.Restricted, p.Values, p.types = true, values, types
	return nil
}

// anyNull is a condition true when any of the quoted columns is NULL.
func anyNull(quoted []string) string {
	terms := make([]string, len(quoted))
	for i, q := range quoted {
		terms[i] = q + " IS NULL"
	}
	return strings.Join(terms, " OR ")
}

// changedValues reads the non-NULL values of PartitionsTable's one
// column, as text, in order.
func (u *Upstream) changedValues(ctx context.Context, tx *sql.Tx) ([]string, error) {
	col := sqltext.QuoteIdent(u.Partitions.Columns[0])
	rows, err := tx.QueryContext(ctx, "SELECT CAST("+col+" AS VARCHAR) FROM "+PartitionsTable+" WHERE "+col+" IS NOT NULL ORDER BY "+col)
	if err != nil {
		return nil, fmt.Errorf("changed %ss of job %s: %w", u.Partitions.unit(), u.Job.Name, catalog.TrimSQLError(err))
	}
	defer rows.Close()
	values := []string{}
	for rows.Next() {
		var v string
		if err := rows.Scan(&v); err != nil {
			return nil, err
		}
		values = append(values, v)
	}
	return values, rows.Err()
}

// everyChanged says why the run should read every row instead: every
// partition the target holds changed, or (by key) as many keys as the
// target holds rows did, so reading every row costs less than
// restricting them. "" when some are kept.
func (u *Upstream) everyChanged(ctx context.Context, tx *sql.Tx, quoted []string) (string, error) {
	p := u.Partitions
	target := "main." + sqltext.QuoteIdent(u.Job.Table)
	if p.ByKey {
		var rows int64
		if err := tx.QueryRowContext(ctx, "SELECT count(*) FROM "+target).Scan(&rows); err != nil {
			return "", fmt.Errorf("changed keys of job %s: %w", u.Job.Name, catalog.TrimSQLError(err))
		}
		if p.Count >= rows {
			return fmt.Sprintf("as many keys changed (%d) as the target holds (%d)", p.Count, rows), nil
		}
		return "", nil
	}
	var kept int64
	col := quoted[0]
	if err := tx.QueryRowContext(ctx, "SELECT count(*) FROM (SELECT DISTINCT "+col+" FROM "+target+
		" WHERE "+col+" NOT IN (SELECT "+col+" FROM "+PartitionsTable+" WHERE "+col+" IS NOT NULL))").Scan(&kept); err != nil {
		return "", fmt.Errorf("changed partitions of job %s: %w", u.Job.Name, catalog.TrimSQLError(err))
	}
	if kept == 0 {
		return fmt.Sprintf("every partition changed (%d)", p.Count), nil
	}
	return "", nil
}

// partitionRelation is the query of upstream table target's rows in the
// changed partitions (keys).
func (u *Upstream) partitionRelation(target string) string {
	p := u.Partitions
	from := "SELECT * FROM main." + sqltext.QuoteIdent(target)
	if len(p.Columns) > 1 {
		// A key of several columns: a NULL in one of them matches a NULL.
		on := make([]string, len(p.Columns))
		for i, c := range p.Columns {
			q := sqltext.QuoteIdent(c)
			on[i] = "u." + q + " IS NOT DISTINCT FROM c." + q
		}
		return "SELECT u.* FROM main." + sqltext.QuoteIdent(target) + " AS u SEMI JOIN temp." + PartitionsTable + " AS c ON " + strings.Join(on, " AND ")
	}
	col := sqltext.QuoteIdent(p.Columns[0])
	in := "SELECT " + col + " FROM temp." + PartitionsTable
	if p.listed {
		// The values were written as text from the column's type: read
		// back as that type they are the same values.
		in = "NULL"
		if len(p.Values) > 0 {
			vals := make([]string, len(p.Values))
			for i, v := range p.Values {
				vals[i] = "CAST(" + sqltext.SQLString(v) + " AS " + p.types[0] + ")"
			}
			in = strings.Join(vals, ", ")
		}
	}
	where := col + " IN (" + in + ")"
	if p.null {
		where += " OR " + col + " IS NULL"
	}
	return from + " WHERE " + where
}

func columnNames(cols []catalog.TargetColumn) string {
	names := make([]string, len(cols))
	for i, c := range cols {
		names[i] = c.Name
	}
	return strings.Join(names, ", ")
}
