// How idem export writes each DuckDB type to Parquet so that it keeps its
// values.

package export

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/idem-dev/idem/internal/catalog"
	"github.com/idem-dev/idem/internal/run"
	"github.com/idem-dev/idem/internal/sqltext"
)

// ParquetTypes documents the Parquet type idem export --format parquet
// writes for each DuckDB type; every one keeps the column's values exactly
// (read back with read_parquet, each value equals the one exported).
// DuckDB's own writer is used as it is except where it loses values: it
// writes HUGEINT and UHUGEINT as DOUBLE, INTERVAL to the millisecond and
// TIME WITH TIME ZONE shifted to UTC, offset lost.
const ParquetTypes = `DuckDB type                  Parquet type written
BOOLEAN                      BOOLEAN
TINYINT SMALLINT INTEGER     INT32 (INT_8, INT_16, INT_32)
BIGINT                       INT64
UTINYINT USMALLINT UINTEGER  INT32 (UINT_8, UINT_16, UINT_32)
UBIGINT                      INT64 (UINT_64)
HUGEINT UHUGEINT             DECIMAL(38,0) (FIXED_LEN_BYTE_ARRAY); a value
                             beyond 38 digits is refused, never rounded
DECIMAL(p,s)                 DECIMAL(p,s) (INT32, INT64 or FIXED_LEN_BYTE_ARRAY)
REAL DOUBLE                  FLOAT DOUBLE (-0.0, NaN and infinities kept)
VARCHAR ENUM BIT BIGNUM      BYTE_ARRAY (UTF8), the value's text
JSON                         BYTE_ARRAY (JSON)
BLOB                         BYTE_ARRAY
UUID                         FIXED_LEN_BYTE_ARRAY(16) (UUID)
DATE                         INT32 (DATE), infinities kept
TIME TIME_NS                 INT64 (TIME micros, nanos)
TIME WITH TIME ZONE          BYTE_ARRAY (UTF8), its text with the offset
                             (Parquet's TIME keeps no offset)
TIMESTAMP TIMESTAMP_S        INT64 (TIMESTAMP micros)
TIMESTAMP_MS                 INT64 (TIMESTAMP millis)
TIMESTAMP_NS                 INT64 (TIMESTAMP nanos)
TIMESTAMP WITH TIME ZONE     INT64 (TIMESTAMP micros, adjusted to UTC)
INTERVAL                     FIXED_LEN_BYTE_ARRAY(12) (INTERVAL: months,
                             days, milliseconds); a value with a fraction
                             of a millisecond, or a negative part, is
                             refused; a time part of 24 hours or more is
                             written as days and the rest ('36 hours' reads
                             back '1 day 12:00:00', equal in DuckDB)
LIST ARRAY MAP STRUCT UNION  LIST, MAP, group; a UNION as a group of its
                             tag (element1, the member's index from 0) and
                             its members; nested HUGEINT, UHUGEINT,
                             INTERVAL or TIME WITH TIME ZONE is refused`

// ErrInexactParquet is what an export to Parquet returns (wrapped, naming
// the column and a value) for a value that Parquet cannot hold exactly:
// nothing is written. CSV and JSON lines keep every value.
var ErrInexactParquet = errors.New("parquet cannot hold this value exactly")

// maxDecimal38 is the largest magnitude of DECIMAL(38,0).
const maxDecimal38 = "99999999999999999999999999999999999999"

var (
	// lossyInNested finds, in a nested type's name, the types that a
	// Parquet export rewrites or checks (quoted ENUM labels removed first).
	lossyInNested = regexp.MustCompile(`\b(U?HUGEINT|INTERVAL|TIME WITH TIME ZONE)\b`)
	quotedLabel   = regexp.MustCompile(`'(?:[^']|'')*'`)
)

// exactParquetQuery is query as an export to Parquet writes it: each
// HUGEINT and UHUGEINT column cast to DECIMAL(38,0) and each TIME WITH
// TIME ZONE column to its text (see ParquetTypes). It first checks, in
// one pass over the rows, that no HUGEINT is beyond DECIMAL(38,0) and no
// INTERVAL holds a fraction of a millisecond or a negative part; one that does is an error
// wrapping ErrInexactParquet that names the column and its smallest such
// value (as text). The projection keeps query's ORDER BY.
func exactParquetQuery(ctx context.Context, q catalog.Querier, query string) (string, error) {
	cols, err := run.DescribeColumns(ctx, q, query)
	if err != nil {
		return "", err
	}
	var list, checks []string
	var checked []struct{ col, problem string }
	rewritten := false
	for _, c := range cols {
		name := sqltext.QuoteIdent(c.Name)
		switch t := strings.ToUpper(c.Type); {
		case t == "HUGEINT" || t == "UHUGEINT":
			list = append(list, "CAST("+name+" AS DECIMAL(38,0)) AS "+name)
			beyond := name + " > CAST('" + maxDecimal38 + "' AS " + t + ")"
			if t == "HUGEINT" {
				beyond += " OR " + name + " < CAST('-" + maxDecimal38 + "' AS HUGEINT)"
			}
			checks = append(checks, "min(CAST("+name+" AS VARCHAR)) FILTER (WHERE "+beyond+")")
			checked = append(checked, struct{ col, problem string }{c.Name + " (" + t + ")", "is beyond DECIMAL(38,0), the widest exact Parquet integer"})
			rewritten = true
		case t == "INTERVAL":
			list = append(list, name)
			checks = append(checks, "min(CAST("+name+" AS VARCHAR)) FILTER (WHERE datepart('microseconds', "+name+") % 1000 <> 0)",
				"min(CAST("+name+" AS VARCHAR)) FILTER (WHERE least(datepart('year', "+name+"), datepart('month', "+name+"), datepart('day', "+name+"), datepart('hour', "+name+"), datepart('minute', "+name+"), datepart('microseconds', "+name+")) < 0)")
			checked = append(checked, struct{ col, problem string }{c.Name + " (INTERVAL)", "has a fraction of a millisecond, which Parquet's INTERVAL drops"},
				struct{ col, problem string }{c.Name + " (INTERVAL)", "is negative, which Parquet's INTERVAL cannot hold"})
		case t == "TIME WITH TIME ZONE":
			list = append(list, "CAST("+name+" AS VARCHAR) AS "+name)
			rewritten = true
		case lossyInNested.MatchString(quotedLabel.ReplaceAllString(t, "")):
			return "", fmt.Errorf("column %s (%s): %w: a HUGEINT, UHUGEINT, INTERVAL or TIME WITH TIME ZONE inside a nested type; export csv or jsonl, or cast it in the model", c.Name, c.Type, ErrInexactParquet)
		default:
			list = append(list, name)
		}
	}
	if len(checks) > 0 {
		found := make([]any, len(checks))
		vals := make([]*string, len(checks))
		for i := range vals {
			found[i] = &vals[i]
		}
		if err := q.QueryRowContext(ctx, "SELECT "+strings.Join(checks, ", ")+" FROM ("+query+")").Scan(found...); err != nil {
			return "", fmt.Errorf("check the values for parquet: %w", catalog.TrimSQLError(err))
		}
		for i, v := range vals {
			if v != nil {
				return "", fmt.Errorf("column %s: %s %s: %w; export csv or jsonl, or narrow it in the model", checked[i].col, *v, checked[i].problem, ErrInexactParquet)
			}
		}
	}
	if !rewritten {
		return query, nil
	}
	return "SELECT " + strings.Join(list, ", ") + " FROM (" + query + ") AS idem_parquet", nil
}
