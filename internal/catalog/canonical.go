package catalog

import (
	"context"
	"database/sql"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/idem-dev/idem/internal/sqltext"
)

// The canonical export: a snapshot's sha256 is that of its rows written as
// CSV (CSVCopyOptions), each value as DuckDB 1.5.6 wrote it, which is how
// every sha256 recorded before DuckDB 2.0 was taken. DuckDB 2.0 writes two
// kinds of value differently, and the export writes those as 1.5.6 did,
// so a recorded sha256 stays provable:
//
//   - TIME WITH TIME ZONE whose offset has seconds but no minutes: 1.5.6
//     left the zero minutes out (+05:00:09 written +05:09), 2.0 writes
//     them;
//   - ARRAY (fixed size): 1.5.6 wrote its elements as they cast to text,
//     2.0 quotes strings as a LIST does (['', 'x,y'] where 1.5.6 wrote
//     [, x,y]).
//
// Every other type was checked byte for byte (internal/export,
// TestExportGoldenPerType). A value of these two types nested in a LIST,
// STRUCT, MAP or UNION is refused (ErrEngineText) rather than written
// with other bytes.

// ErrEngineText marks a column whose text the engine writes differently
// from the canonical export and that idem cannot write canonically.
var ErrEngineText = fmt.Errorf("the canonical export cannot write this type as DuckDB 1.5.6 did")

// timeTZ is DuckDB's name of TIMETZ in DESCRIBE and duckdb_columns().
const timeTZ = "TIME WITH TIME ZONE"

// arraySuffix matches the size of a fixed-size ARRAY type at its end,
// arraySize one anywhere in a type.
var (
	arraySuffix = regexp.MustCompile(`\[([0-9]+)\]$`)
	arraySize   = regexp.MustCompile(`\[[0-9]+\]`)
)

// CanonicalCSVQuery returns the query whose rows the canonical CSV export
// writes for query: query itself when none of its columns needs it, else a
// projection of it that writes each TIME WITH TIME ZONE and ARRAY column as
// DuckDB 1.5.6 did. DuckDB keeps the order of query's ORDER BY through the
// projection. A column of a type it cannot write so gives an error
// wrapping ErrEngineText.
func CanonicalCSVQuery(ctx context.Context, q Querier, query string) (string, error) {
	return canonicalCSVQuery(ctx, q, query, false)
}

// UnsignedZeroCSVQuery is CanonicalCSVQuery that also writes -0.0 as 0.0
// in every DOUBLE and REAL column, as DuckDB 1.5 wrote the rows of EXCEPT
// ALL and INTERSECT ALL (and so idem's history rows): a rerun compares the
// rows it rebuilt on DuckDB 2.0 written so with a snapshot committed on
// 1.5 (history.Rerun).
func UnsignedZeroCSVQuery(ctx context.Context, q Querier, query string) (string, error) {
	return canonicalCSVQuery(ctx, q, query, true)
}

func canonicalCSVQuery(ctx context.Context, q Querier, query string, unsignedZero bool) (string, error) {
	rows, err := q.QueryContext(ctx, "SELECT column_name, column_type FROM (DESCRIBE "+query+")")
	if err != nil {
		return "", fmt.Errorf("describe the export: %w", TrimSQLError(err))
	}
	var cols []TargetColumn
	for rows.Next() {
		var c TargetColumn
		if err := rows.Scan(&c.Name, &c.Type); err != nil {
			rows.Close()
			return "", err
		}
		cols = append(cols, c)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return "", fmt.Errorf("describe the export: %w", TrimSQLError(err))
	}
	list, changed, err := canonicalSelectList(cols, unsignedZero)
	if err != nil || !changed {
		return query, err
	}
	return "SELECT " + list + " FROM (" + query + ") AS idem_canonical", nil
}

// CanonicalSelectList is the select list of cols (quoted names, in order)
// as the canonical export writes them, and whether any column is written
// otherwise than as itself.
func CanonicalSelectList(cols []TargetColumn) (string, bool, error) {
	return canonicalSelectList(cols, false)
}

func canonicalSelectList(cols []TargetColumn, unsignedZero bool) (string, bool, error) {
	sel := make([]string, len(cols))
	changed := false
	for i, c := range cols {
		id := sqltext.QuoteIdent(c.Name)
		expr, ok, err := canonicalText(id, c.Type, 0)
		if t := strings.TrimSpace(c.Type); unsignedZero && !ok && err == nil && (t == "DOUBLE" || t == "FLOAT" || t == "REAL") {
			// -0.0 = 0 holds: the CASE writes it +0.0.
			expr, ok = "CASE WHEN "+id+" = 0 THEN CAST(0 AS "+t+") ELSE "+id+" END", true
		}
		if err != nil {
			return "", false, fmt.Errorf("column %s of type %s: %w", c.Name, c.Type, err)
		}
		if ok {
			sel[i], changed = expr+" AS "+id, true
		} else {
			sel[i] = id
		}
	}
	return strings.Join(sel, ", "), changed, nil
}

// canonicalText returns the VARCHAR expression that writes expr, of type
// typ, as DuckDB 1.5.6 wrote it, and true; or false when DuckDB writes
// the type as 1.5.6 did. depth names the lambda variable of a nested
// ARRAY.
func canonicalText(expr, typ string, depth int) (string, bool, error) {
	typ = strings.TrimSpace(typ)
	if typ == timeTZ || typ == "TIMETZ" {
		// 2.0 writes +HH:00:SS where 1.5.6 wrote +HH:SS; every other
		// offset is written alike.
		return `regexp_replace(CAST(` + expr + ` AS VARCHAR), '([+-][0-9][0-9]):00:([0-9][0-9])$', '\1:\2')`, true, nil
	}
	if m := arraySuffix.FindStringSubmatchIndex(typ); m != nil {
		elem := typ[:m[0]]
		if nestsEngineText(elem) && !isArray(elem) && elem != timeTZ {
			return "", false, ErrEngineText
		}
		// The elements as they cast to text (an ARRAY or TIMETZ element
		// as 1.5.6 wrote it), NULL as NULL, joined by ", ".
		v := fmt.Sprintf("idem_e%d", depth)
		text, ok, err := canonicalText(v, elem, depth+1)
		if err != nil {
			return "", false, err
		}
		if !ok {
			text = "CAST(" + v + " AS VARCHAR)"
		}
		return "CASE WHEN " + expr + " IS NULL THEN NULL ELSE '[' || array_to_string(list_transform(CAST(" + expr + " AS " + elem + "[]), " +
			"lambda " + v + ": coalesce(" + text + ", 'NULL')), ', ') || ']' END", true, nil
	}
	if nestsEngineText(typ) {
		return "", false, ErrEngineText
	}
	return "", false, nil
}

// isArray says typ is a fixed-size ARRAY type.
func isArray(typ string) bool { return arraySuffix.MatchString(strings.TrimSpace(typ)) }

// nestsEngineText says typ holds, anywhere, a TIME WITH TIME ZONE or a
// fixed-size ARRAY.
func nestsEngineText(typ string) bool {
	return strings.Contains(typ, timeTZ) || strings.Contains(typ, "TIMETZ") || arraySize.MatchString(typ)
}

// duckDB2Version is the catalog version of the move to DuckDB 2.0
// (migrations/0007_duckdb_two.sql).
const duckDB2Version = 7

// Committed15 says snapshot of job was committed by an idem on DuckDB 1.5:
// every snapshot of a database not yet migrated to catalog version 7
// (an idem on 2.0 migrates at its first writable open), else one at or
// before the last that migration recorded for the job.
func Committed15(ctx context.Context, q Querier, jobName string, snapshot int64) (bool, error) {
	if v, err := Version(ctx, q); err != nil || v < duckDB2Version {
		return err == nil, err
	}
	var last sql.NullString
	if err := q.QueryRowContext(ctx, `SELECT max(value) FROM idem.meta WHERE key = ?`, "duckdb15_last:"+jobName).Scan(&last); err != nil {
		return false, fmt.Errorf("read the last DuckDB 1.5 snapshot of %s: %w", jobName, TrimSQLError(err))
	}
	if !last.Valid {
		return false, nil
	}
	n, err := strconv.ParseInt(last.String, 10, 64)
	if err != nil {
		return false, fmt.Errorf("read the last DuckDB 1.5 snapshot of %s: %q is not a snapshot", jobName, last.String)
	}
	return snapshot <= n, nil
}
