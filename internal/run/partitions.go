package run

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"

	"github.com/idem-dev/idem/internal/catalog"
	"github.com/idem-dev/idem/internal/report"
	"github.com/idem-dev/idem/internal/sqltext"
)

// Partition replacement ([target] partition_by). The steps of a refresh
// pipeline write the complete target of their input as always; for a
// partitioned job that result is the staged content of the partitions it
// holds. Before the steps, keepPartitions copies the committed target
// aside; after them, replacePartitions puts back every committed row of the
// partitions the run does not replace, so the run changes exactly the
// declared partitions (and, with a key, the old place of a row that moved
// into one of them). Released SQL stays as it is: the mechanism is idem's,
// around the steps, inside the run's one transaction.

// partitionRun is what a partitioned run found and did.
type partitionRun struct {
	column   string
	kept     bool     // the committed target was copied aside (idem_part_prev)
	declared []string // the partitions replaced, as text, in the column's order
	repaired []string // other partitions a moved key was removed from
	written  int64    // staged rows inserted plus moved rows removed
}

// touched lists every partition the run changed, declared first.
func (p *partitionRun) touched() []string {
	out := slices.Clone(p.declared)
	return append(out, p.repaired...)
}

// keepPartitions copies the committed target of a partitioned job aside
// (temp table idem_part_prev) before the steps replace it.
func (r *txRun) keepPartitions(ctx context.Context) error {
	if r.j.PartitionBy == "" || r.j.Incremental != "" {
		// An incremental model replaces its partitions itself, or,
		// rebuilt, is replaced whole (incremental.go).
		return nil
	}
	r.part = &partitionRun{column: r.j.PartitionBy}
	if !r.exists || !r.st.HasParts || r.st.Target != r.j.Table {
		return nil // a first load: nothing committed to keep
	}
	if _, err := r.tx.ExecContext(ctx, "CREATE OR REPLACE TEMP TABLE idem_part_prev AS SELECT * FROM "+sqltext.QuoteIdent(r.j.Table)); err != nil {
		return fmt.Errorf("keep the partitions of %s: %w", r.j.Table, catalog.TrimSQLError(err))
	}
	r.part.kept = true
	return nil
}

// replacePartitions turns the steps' target (the staged rows) into the
// committed target with only the declared partitions replaced. A staged
// row outside the declared partitions refuses the run; a declared
// partition without staged rows becomes empty.
func (r *txRun) replacePartitions(ctx context.Context) error {
	pr := r.part
	if pr == nil {
		return nil
	}
	j, tx := r.j, r.tx
	target := sqltext.QuoteIdent(j.Table)
	cols, err := catalog.TargetColumns(ctx, tx, j.Table)
	if err != nil {
		return err
	}
	typ := ""
	var names []string
	for _, c := range cols {
		names = append(names, c.Name)
		if c.Name == pr.column {
			typ = c.Type
		}
	}
	if typ == "" {
		return report.Usage("job %s: [target] partition_by = %q is not a column of %s (columns: %s)", j.Name, pr.column, j.Table, strings.Join(names, ", "))
	}
	qc := sqltext.QuoteIdent(pr.column)
	var nulls int64
	if err := tx.QueryRowContext(ctx, "SELECT count(*) FROM "+target+" WHERE "+qc+" IS NULL").Scan(&nulls); err != nil {
		return fmt.Errorf("partitions of %s: %w", j.Table, catalog.TrimSQLError(err))
	}
	if nulls > 0 {
		return report.Refuse("partition", "%d staged rows of %s have no %s (NULL): every row must belong to a partition; nothing committed", nulls, j.Table, pr.column)
	}
	staged, err := textColumn(ctx, tx, "SELECT CAST(v AS VARCHAR) FROM (SELECT DISTINCT "+qc+" AS v FROM "+target+") ORDER BY v")
	if err != nil {
		return fmt.Errorf("partitions of %s: %w", j.Table, err)
	}
	pr.declared = staged
	if r.opts.Partitions != nil {
		// The declared values, read as the column's type and written back
		// as text, so 047 names partition 47.
		declared, err := textColumn(ctx, tx, "SELECT DISTINCT CAST(TRY_CAST(v AS "+typ+") AS VARCHAR) AS t, TRY_CAST(v AS "+typ+") AS o FROM unnest(?::VARCHAR[]) AS u(v) ORDER BY o NULLS FIRST", r.opts.Partitions)
		if err != nil {
			return fmt.Errorf("partitions of %s: %w", j.Table, err)
		}
		var bad int64
		if err := tx.QueryRowContext(ctx, "SELECT count(*) FROM unnest(?::VARCHAR[]) AS u(v) WHERE TRY_CAST(v AS "+typ+") IS NULL", r.opts.Partitions).Scan(&bad); err != nil {
			return fmt.Errorf("partitions of %s: %w", j.Table, catalog.TrimSQLError(err))
		}
		if bad > 0 {
			return report.Usage("--partitions %s: a value is not a %s (the type of %s.%s)", strings.Join(r.opts.Partitions, ","), typ, j.Table, pr.column)
		}
		var outside []string
		for _, s := range staged {
			if !slices.Contains(declared, s) {
				outside = append(outside, s)
			}
		}
		if len(outside) > 0 {
			return report.Refuse("partition", "staged rows of %s lie in partition %s = %s, outside --partitions %s: a run replaces only the partitions it declares; nothing committed",
				j.Table, pr.column, strings.Join(outside, ", "), strings.Join(declared, ","))
		}
		pr.declared = declared
	}
	if err := tx.QueryRowContext(ctx, "SELECT count(*) FROM "+target).Scan(&pr.written); err != nil {
		return fmt.Errorf("partitions of %s: %w", j.Table, catalog.TrimSQLError(err))
	}
	if !pr.kept {
		return nil
	}
	// The committed rows that stay: not in a replaced partition and, with a
	// key, not a key the staged rows now hold elsewhere ("repair both").
	keep := "NOT list_contains(getvariable('idem_partitions'), CAST(" + qc + " AS VARCHAR))"
	if _, err := tx.ExecContext(ctx, "SET VARIABLE idem_partitions = ?::VARCHAR[]", pr.declared); err != nil {
		return fmt.Errorf("bind partitions: %w", err)
	}
	stmts := []string{"CREATE OR REPLACE TEMP TABLE idem_part_new AS SELECT * FROM " + target}
	if key := j.Pipeline.Key; len(key) > 0 {
		k := identList(key)
		moved := "(" + k + ") IN (SELECT (" + k + ") FROM idem_part_new)"
		if len(key) == 1 {
			moved = k + " IN (SELECT " + k + " FROM idem_part_new)"
		}
		if _, err := tx.ExecContext(ctx, stmts[0]); err != nil {
			return fmt.Errorf("replace partitions of %s: %w", j.Table, catalog.TrimSQLError(err))
		}
		stmts = nil
		rows, err := textColumn(ctx, tx, "SELECT CAST(v AS VARCHAR) FROM (SELECT DISTINCT "+qc+" AS v FROM idem_part_prev WHERE "+keep+" AND "+moved+") ORDER BY v")
		if err != nil {
			return fmt.Errorf("replace partitions of %s: %w", j.Table, err)
		}
		pr.repaired = rows
		var n int64
		if err := tx.QueryRowContext(ctx, "SELECT count(*) FROM idem_part_prev WHERE "+keep+" AND "+moved).Scan(&n); err != nil {
			return fmt.Errorf("replace partitions of %s: %w", j.Table, catalog.TrimSQLError(err))
		}
		pr.written += n
		keep += " AND NOT (" + moved + ")"
	}
	stmts = append(stmts,
		"DELETE FROM "+target,
		"INSERT INTO "+target+" BY NAME SELECT * FROM idem_part_prev WHERE "+keep,
		"INSERT INTO "+target+" BY NAME SELECT * FROM idem_part_new",
		"DROP TABLE idem_part_prev", "DROP TABLE idem_part_new",
	)
	for _, q := range stmts {
		if _, err := tx.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("replace partitions of %s: %w", j.Table, catalog.TrimSQLError(err))
		}
	}
	return nil
}

func identList(cols []string) string {
	q := make([]string, len(cols))
	for i, c := range cols {
		q[i] = sqltext.QuoteIdent(c)
	}
	return strings.Join(q, ", ")
}

// textColumn returns the first column of a query's rows as text.
func textColumn(ctx context.Context, tx *sql.Tx, query string, args ...any) ([]string, error) {
	rows, err := tx.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, catalog.TrimSQLError(err)
	}
	defer rows.Close()
	out := []string{}
	for rows.Next() {
		var s sql.NullString
		var rest []any
		n, _ := rows.Columns()
		dest := []any{&s}
		for i := 1; i < len(n); i++ {
			var x any
			rest = append(rest, &x)
		}
		dest = append(dest, rest...)
		if err := rows.Scan(dest...); err != nil {
			return nil, err
		}
		out = append(out, s.String)
	}
	return out, rows.Err()
}
