// Pinned reads of a job's tables at a snapshot, shared by export and diff.

package ops

import (
	"context"
	"slices"
	"strings"

	"github.com/idem-dev/idem/internal/catalog"
	"github.com/idem-dev/idem/internal/job"
)

// tableSource is a pinned read of one of a job's tables: its SELECT, its
// columns and the columns that identify a row.
type tableSource struct {
	table    string
	query    string
	columns  []string
	types    []string // DuckDB type of each column
	key      []string
	snapshot int64
	// unique says the key identifies a row: a target holds one row per key
	// (the rank step guarantees it, the tests assert it), and so does a
	// pinned read of its history.
	unique bool
}

// orderBy is the total order of an export: the key columns, then, unless
// the key is unique, every other column, so that rows equal in the key
// still have one order. Sorting on the key alone where it is unique keeps
// an export within a few percent of a raw COPY.
func (s *tableSource) orderBy() string {
	var order []string
	for _, k := range s.key {
		order = append(order, job.QuoteIdent(k))
	}
	if !s.unique {
		for _, c := range s.columns {
			if !slices.Contains(s.key, c) {
				order = append(order, job.QuoteIdent(c))
			}
		}
	}
	return " ORDER BY " + strings.Join(order, ", ")
}

func (s *tableSource) ordered() string { return s.query + s.orderBy() }

// targetColumns are the source's columns with their types.
func (s *tableSource) targetColumns() []catalog.TargetColumn {
	out := make([]catalog.TargetColumn, len(s.columns))
	for i, c := range s.columns {
		out[i] = catalog.TargetColumn{Name: c, Type: s.types[i]}
	}
	return out
}

// pinnedSource builds the read of table as committed at snapshot (0: the
// latest). The target is read from its history (or, at the latest snapshot,
// from the table itself, which holds the same rows); <target>_outcomes holds
// the outcomes of the batches committed at or before the snapshot.
func pinnedSource(ctx context.Context, q catalog.Querier, j *job.Job, table string, snapshot int64) (*tableSource, error) {
	if table == "" {
		table = j.Table
	}
	s, latest, err := catalog.ResolveSnapshot(ctx, q, j.Name, snapshot)
	if err != nil {
		return nil, err
	}
	row, err := catalog.ReadSnapshot(ctx, q, j.Name, s)
	if err != nil {
		return nil, err
	}
	src := &tableSource{table: table, snapshot: s, key: row.KeyColumns}
	switch table {
	case j.Table:
		for _, c := range row.Columns {
			src.columns = append(src.columns, c.Name)
			src.types = append(src.types, c.Type)
		}
		src.unique = len(src.key) > 0
		if !src.unique {
			src.key = src.columns
		}
		if s == latest {
			src.query = "SELECT " + identList(src.columns) + " FROM " + job.QuoteIdent(j.Table)
		} else {
			if src.query, err = catalog.PinnedSelect(ctx, q, j.Name, row.Columns, s); err != nil {
				return nil, err
			}
		}
	case j.Table + "_outcomes":
		cols, err := catalog.TargetColumns(ctx, q, table)
		if err != nil {
			return nil, err
		}
		if len(cols) == 0 {
			return nil, job.Usage("job %s has no table %s", j.Name, table)
		}
		hasBatch := false
		for _, c := range cols {
			src.columns = append(src.columns, c.Name)
			src.types = append(src.types, c.Type)
			hasBatch = hasBatch || c.Name == "batch_id"
		}
		// Outcomes are a log: no column identifies a row, so all of them do.
		src.key = src.columns
		src.query = "SELECT " + identList(src.columns) + " FROM " + job.QuoteIdent(table)
		switch {
		case hasBatch:
			src.query += " WHERE batch_id IN (" + catalog.LedgerBatchesUpTo(j.Name, s) + ")"
		case s != latest:
			return nil, job.Usage("%s keeps the outcomes of the latest snapshot only (%d); it has no batch_id to pin snapshot %d", table, latest, s)
		}
	default:
		return nil, job.Usage("table %s: export reads the job's target %s or %s_outcomes", table, j.Table, j.Table)
	}
	return src, nil
}

func identList(cols []string) string {
	q := make([]string, len(cols))
	for i, c := range cols {
		q[i] = job.QuoteIdent(c)
	}
	return strings.Join(q, ", ")
}

// PinnedTable is a pinned read of a job's target as committed at a
// snapshot, as export reads it: its SELECT in export order, its columns
// with their DuckDB types and the columns that identify a row. Publishers
// (idem-iceberg) read snapshots through it.
type PinnedTable struct {
	Snapshot int64
	Query    string
	Columns  []catalog.TargetColumn
	Key      []string
}

// PinnedRead is the read of job j's target at snapshot (0: the latest),
// through q (a read transaction, so that the query sees the commit the
// columns were read from). An expired snapshot is refused (exit 3).
func PinnedRead(ctx context.Context, q catalog.Querier, j *job.Job, snapshot int64) (*PinnedTable, error) {
	src, err := pinnedSource(ctx, q, j, j.Table, snapshot)
	if err != nil {
		return nil, err
	}
	return &PinnedTable{Snapshot: src.snapshot, Query: src.ordered(), Columns: src.targetColumns(), Key: src.key}, nil
}
