package catalog

import (
	"context"
	"fmt"

	"github.com/idem-dev/idem/internal/sqltext"
)

// DatabaseDigest describes what a database holds, for comparing two copies
// of it (compact checks its new file against the old one): every schema
// object as its SQL, and every table's row count and an order-free sum of
// its rows' hashes.
type DatabaseDigest struct {
	// Objects is one line per schema, table, view, sequence, index, type,
	// macro and comment, sorted.
	Objects []string
	// Tables maps schema.table to "rows sum".
	Tables map[string]string
}

// digestObjectsSQL lists the objects of the default catalog as text. A
// sequence is its SQL, which names the next value it gives (START), not
// its start_value, which COPY FROM DATABASE sets to that next value.
const digestObjectsSQL = `
SELECT 'schema ' || schema_name FROM duckdb_schemas() WHERE database_name = current_database() AND NOT internal
UNION ALL SELECT 'table ' || schema_name || '.' || table_name || ': ' || sql || coalesce(' -- ' || comment, '') FROM duckdb_tables() WHERE database_name = current_database()
UNION ALL SELECT 'column ' || schema_name || '.' || table_name || '.' || column_name || ' -- ' || comment FROM duckdb_columns() WHERE database_name = current_database() AND comment IS NOT NULL
UNION ALL SELECT 'view ' || schema_name || '.' || view_name || ': ' || sql || coalesce(' -- ' || comment, '') FROM duckdb_views() WHERE database_name = current_database() AND NOT internal
UNION ALL SELECT 'sequence ' || schema_name || '.' || sequence_name || ': ' || sql FROM duckdb_sequences() WHERE database_name = current_database()
UNION ALL SELECT 'index ' || schema_name || '.' || index_name || ': ' || coalesce(sql, '') FROM duckdb_indexes() WHERE database_name = current_database()
UNION ALL SELECT 'type ' || schema_name || '.' || type_name || ': ' || logical_type FROM duckdb_types() WHERE database_name = current_database() AND NOT internal
UNION ALL SELECT 'macro ' || schema_name || '.' || function_name || '(' || array_to_string(parameters, ', ') || '): ' || coalesce(macro_definition, '')
  FROM duckdb_functions() WHERE database_name = current_database() AND NOT internal AND function_type IN ('macro', 'table_macro')
ORDER BY 1`

// Digest reads the DatabaseDigest of q's default catalog. It reads every
// row of every table, so it takes about as long as a scan of the database.
func Digest(ctx context.Context, q Querier) (*DatabaseDigest, error) {
	d := &DatabaseDigest{Tables: map[string]string{}}
	rows, err := q.QueryContext(ctx, digestObjectsSQL)
	if err != nil {
		return nil, fmt.Errorf("list database objects: %w", err)
	}
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			rows.Close()
			return nil, fmt.Errorf("list database objects: %w", err)
		}
		d.Objects = append(d.Objects, s)
	}
	if err := rows.Close(); err != nil {
		return nil, fmt.Errorf("list database objects: %w", err)
	}
	tables, err := q.QueryContext(ctx, `SELECT schema_name, table_name FROM duckdb_tables() WHERE database_name = current_database() ORDER BY ALL`)
	if err != nil {
		return nil, fmt.Errorf("list tables: %w", err)
	}
	var names [][2]string
	for tables.Next() {
		var s, t string
		if err := tables.Scan(&s, &t); err != nil {
			tables.Close()
			return nil, fmt.Errorf("list tables: %w", err)
		}
		names = append(names, [2]string{s, t})
	}
	if err := tables.Close(); err != nil {
		return nil, fmt.Errorf("list tables: %w", err)
	}
	for _, n := range names {
		// hash(t) hashes the whole row as a struct; summing the hashes as
		// HUGEINT gives a value that does not depend on the rows' order.
		var count int64
		var sum string
		if err := q.QueryRowContext(ctx, `SELECT count(*), coalesce(sum(hash(t)::HUGEINT), 0)::VARCHAR FROM `+
			sqltext.QuoteIdent(n[0])+"."+sqltext.QuoteIdent(n[1])+` AS t`).Scan(&count, &sum); err != nil {
			return nil, fmt.Errorf("digest table %s.%s: %w", n[0], n[1], err)
		}
		d.Tables[n[0]+"."+n[1]] = fmt.Sprintf("%d rows, hash sum %s", count, sum)
	}
	return d, nil
}

// Diff returns the first difference between two digests, or "" when they
// are the same.
func (d *DatabaseDigest) Diff(other *DatabaseDigest) string {
	for i := range max(len(d.Objects), len(other.Objects)) {
		var a, b string
		if i < len(d.Objects) {
			a = d.Objects[i]
		}
		if i < len(other.Objects) {
			b = other.Objects[i]
		}
		if a != b {
			return fmt.Sprintf("object %q became %q", a, b)
		}
	}
	for name, a := range d.Tables {
		if b := other.Tables[name]; a != b {
			return fmt.Sprintf("table %s: %s became %s", name, a, b)
		}
	}
	for name := range other.Tables {
		if _, ok := d.Tables[name]; !ok {
			return "table " + name + " appeared"
		}
	}
	return ""
}

// CommitPoint reads the database's id and its latest commit sequence
// (idem.commits).
func CommitPoint(ctx context.Context, q Querier) (id string, seq int64, err error) {
	err = q.QueryRowContext(ctx, `SELECT (SELECT db_id FROM idem.commits WHERE seq = 0), (SELECT max(seq) FROM idem.commits)`).Scan(&id, &seq)
	if err != nil {
		return "", 0, fmt.Errorf("read idem.commits: %w", err)
	}
	return id, seq, nil
}

// JobTargets lists each job that has committed a snapshot with its target
// table, by job name.
func JobTargets(ctx context.Context, q Querier) ([][2]string, error) {
	rows, err := q.QueryContext(ctx, `SELECT job, target FROM idem.jobs WHERE snapshot > 0 AND target IS NOT NULL ORDER BY job`)
	if err != nil {
		return nil, fmt.Errorf("list jobs: %w", err)
	}
	defer rows.Close()
	var out [][2]string
	for rows.Next() {
		var j, t string
		if err := rows.Scan(&j, &t); err != nil {
			return nil, fmt.Errorf("list jobs: %w", err)
		}
		out = append(out, [2]string{j, t})
	}
	return out, rows.Err()
}
