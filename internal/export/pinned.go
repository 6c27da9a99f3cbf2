// Pinned reads of a job's tables at a snapshot, shared by export and diff.

package export

import (
	"context"
	"slices"
	"strings"

	"github.com/idem-dev/idem/internal/catalog"
	"github.com/idem-dev/idem/internal/job"
	"github.com/idem-dev/idem/internal/report"
	"github.com/idem-dev/idem/internal/sqltext"
)

// TableSource is a pinned read of one of a job's tables: its SELECT, its
// columns and the columns that identify a row.
type TableSource struct {
	Table    string
	Query    string
	Columns  []string
	Types    []string // DuckDB type of each column
	Key      []string
	Snapshot int64
	// unique says the key identifies a row: a target holds one row per key
	// (the rank step guarantees it, the tests assert it), and so does a
	// pinned read of its history.
	Unique bool
}

// orderBy is the total order of an export: the key columns, then, unless
// the key is unique, every other column, so that rows equal in the key
// still have one order. Sorting on the key alone where it is unique keeps
// an export within a few percent of a raw COPY.
func (s *TableSource) orderBy() string {
	var order []string
	for _, k := range s.Key {
		order = append(order, sqltext.QuoteIdent(k))
	}
	if !s.Unique {
		for _, c := range s.Columns {
			if !slices.Contains(s.Key, c) {
				order = append(order, sqltext.QuoteIdent(c))
			}
		}
	}
	return " ORDER BY " + strings.Join(order, ", ")
}

// Ordered is the source's SELECT in its total order (orderBy).
func (s *TableSource) Ordered() string { return s.Query + s.orderBy() }

// TargetColumns are the source's columns with their types.
func (s *TableSource) TargetColumns() []catalog.TargetColumn {
	out := make([]catalog.TargetColumn, len(s.Columns))
	for i, c := range s.Columns {
		out[i] = catalog.TargetColumn{Name: c, Type: s.Types[i]}
	}
	return out
}

// PinnedSource builds the read of table as committed at snapshot (0: the
// latest). The target is read from its history (or, at the latest snapshot,
// from the table itself, which holds the same rows); <target>_outcomes holds
// the outcomes of the batches committed at or before the snapshot.
func PinnedSource(ctx context.Context, q catalog.Querier, j *job.Job, table string, snapshot int64) (*TableSource, error) {
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
	src := &TableSource{Table: table, Snapshot: s, Key: row.KeyColumns}
	switch table {
	case j.Table:
		for _, c := range row.Columns {
			src.Columns = append(src.Columns, c.Name)
			src.Types = append(src.Types, c.Type)
		}
		src.Unique = len(src.Key) > 0
		if !src.Unique {
			src.Key = src.Columns
		}
		if s == latest {
			src.Query = "SELECT " + IdentList(src.Columns) + " FROM " + sqltext.QuoteIdent(j.Table)
		} else {
			if src.Query, err = catalog.PinnedSelect(ctx, q, j.Name, row.Columns, s); err != nil {
				return nil, err
			}
		}
	case j.Table + "_outcomes":
		cols, err := catalog.TargetColumns(ctx, q, table)
		if err != nil {
			return nil, err
		}
		if len(cols) == 0 {
			return nil, report.Usage("job %s has no table %s", j.Name, table)
		}
		hasBatch := false
		for _, c := range cols {
			src.Columns = append(src.Columns, c.Name)
			src.Types = append(src.Types, c.Type)
			hasBatch = hasBatch || c.Name == "batch_id"
		}
		// Outcomes are a log: no column identifies a row, so all of them do.
		src.Key = src.Columns
		src.Query = "SELECT " + IdentList(src.Columns) + " FROM " + sqltext.QuoteIdent(table)
		switch {
		case hasBatch:
			src.Query += " WHERE batch_id IN (" + catalog.LedgerBatchesUpTo(j.Name, s) + ")"
		case s != latest:
			return nil, report.Usage("%s keeps the outcomes of the latest snapshot only (%d); it has no batch_id to pin snapshot %d", table, latest, s)
		}
	default:
		return nil, report.Usage("table %s: export reads the job's target %s or %s_outcomes", table, j.Table, j.Table)
	}
	return src, nil
}

// IdentList is cols quoted and joined by commas, for a SELECT list.
func IdentList(cols []string) string {
	q := make([]string, len(cols))
	for i, c := range cols {
		q[i] = sqltext.QuoteIdent(c)
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
	src, err := PinnedSource(ctx, q, j, j.Table, snapshot)
	if err != nil {
		return nil, err
	}
	return &PinnedTable{Snapshot: src.Snapshot, Query: src.Ordered(), Columns: src.TargetColumns(), Key: src.Key}, nil
}
