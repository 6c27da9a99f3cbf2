package job

import (
	"fmt"
	"github.com/idem-dev/idem/internal/report"
	"regexp"
	"strings"
)

var decimalType = regexp.MustCompile(`^DECIMAL\(\s*([0-9]{1,2})\s*,\s*([0-9]{1,2})\s*\)$`)

// columnTypes is the whitelist of DuckDB type names a job may declare for
// its input columns, with accepted aliases mapped to the canonical name.
// TIMESTAMPTZ is left out on purpose: casting text to it depends on the
// session's time zone, so the same bytes could give other rows.
var columnTypes = map[string]string{
	"BOOLEAN": "BOOLEAN", "BOOL": "BOOLEAN",
	"TINYINT": "TINYINT", "SMALLINT": "SMALLINT",
	"INTEGER": "INTEGER", "INT": "INTEGER", "INT4": "INTEGER",
	"BIGINT": "BIGINT", "INT8": "BIGINT", "LONG": "BIGINT",
	"HUGEINT":  "HUGEINT",
	"UTINYINT": "UTINYINT", "USMALLINT": "USMALLINT", "UINTEGER": "UINTEGER", "UBIGINT": "UBIGINT",
	"FLOAT": "FLOAT", "REAL": "FLOAT", "DOUBLE": "DOUBLE", "FLOAT8": "DOUBLE",
	"DECIMAL": "DECIMAL(18,3)",
	"VARCHAR": "VARCHAR", "TEXT": "VARCHAR", "STRING": "VARCHAR",
	"DATE": "DATE", "TIME": "TIME", "TIMESTAMP": "TIMESTAMP", "DATETIME": "TIMESTAMP",
	"INTERVAL": "INTERVAL", "UUID": "UUID", "BLOB": "BLOB",
}

// integerTypes are the canonical types a watermark column may have.
var integerTypes = map[string]bool{
	"TINYINT": true, "SMALLINT": true, "INTEGER": true, "BIGINT": true,
	"UTINYINT": true, "USMALLINT": true, "UINTEGER": true,
}

// canonicalType checks a declared column type against the whitelist and
// returns its canonical spelling.
func canonicalType(t string) (string, error) {
	u := strings.ToUpper(strings.TrimSpace(t))
	if c, ok := columnTypes[u]; ok {
		return c, nil
	}
	if m := decimalType.FindStringSubmatch(u); m != nil {
		var p, s int
		fmt.Sscanf(m[1], "%d", &p)
		fmt.Sscanf(m[2], "%d", &s)
		if p >= 1 && p <= 38 && s <= p {
			return fmt.Sprintf("DECIMAL(%d,%d)", p, s), nil
		}
	}
	names := make([]string, 0, len(columnTypes))
	for k, v := range columnTypes {
		if k == v {
			names = append(names, k)
		}
	}
	return "", fmt.Errorf("type %q is not one idem accepts (one of %s, or DECIMAL(p,s))", t, strings.Join(sortedStrings(names), ", "))
}

func sortedStrings(s []string) []string {
	m := map[string]bool{}
	for _, x := range s {
		m[x] = true
	}
	return report.SortedKeys(m)
}
