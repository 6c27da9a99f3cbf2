package publisher

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/apache/iceberg-go"
	"github.com/idem-dev/idem/runner"
)

// column is one column of a published snapshot: its idem name and DuckDB
// type, the Iceberg type it is published as and the SQL that writes it.
type column struct {
	name, duckType string
	typ            iceberg.Type
	// asText says the column is published as its text (an Iceberg string):
	// DuckDB types Iceberg has no type for (HUGEINT, UBIGINT, UUID,
	// INTERVAL, TIMESTAMP_NS, nested types ...). Reading it back casts the
	// text to the DuckDB type.
	asText bool
}

var decimalType = regexp.MustCompile(`^DECIMAL\((\d+),\s*(\d+)\)$`)

// columnOf maps a DuckDB column to its Iceberg type.
func columnOf(c runner.Column) column {
	t := strings.ToUpper(strings.TrimSpace(c.Type))
	col := column{name: c.Name, duckType: c.Type}
	switch t {
	case "BOOLEAN":
		col.typ = iceberg.PrimitiveTypes.Bool
	case "TINYINT", "SMALLINT", "INTEGER", "UTINYINT", "USMALLINT":
		col.typ = iceberg.PrimitiveTypes.Int32
	case "BIGINT", "UINTEGER":
		col.typ = iceberg.PrimitiveTypes.Int64
	case "FLOAT":
		col.typ = iceberg.PrimitiveTypes.Float32
	case "DOUBLE":
		col.typ = iceberg.PrimitiveTypes.Float64
	case "DATE":
		col.typ = iceberg.PrimitiveTypes.Date
	case "TIME":
		col.typ = iceberg.PrimitiveTypes.Time
	case "TIMESTAMP", "TIMESTAMP_S", "TIMESTAMP_MS":
		col.typ = iceberg.PrimitiveTypes.Timestamp
	case "TIMESTAMP WITH TIME ZONE":
		col.typ = iceberg.PrimitiveTypes.TimestampTz
	case "VARCHAR":
		col.typ = iceberg.PrimitiveTypes.String
	case "BLOB":
		col.typ = iceberg.PrimitiveTypes.Binary
	default:
		if m := decimalType.FindStringSubmatch(t); m != nil {
			p, _ := strconv.Atoi(m[1])
			s, _ := strconv.Atoi(m[2])
			col.typ = iceberg.DecimalTypeOf(p, s)
			break
		}
		col.typ, col.asText = iceberg.PrimitiveTypes.String, true
	}
	return col
}

// writeSQL is the column as the Parquet file holds it: the physical type
// Iceberg expects for its type.
func (c column) writeSQL() string {
	q := runner.QuoteIdent(c.name)
	switch {
	case c.asText:
		return "CAST(" + q + " AS VARCHAR) AS " + q
	case c.typ.Equals(iceberg.PrimitiveTypes.Int32):
		return "CAST(" + q + " AS INTEGER) AS " + q
	case c.typ.Equals(iceberg.PrimitiveTypes.Int64):
		return "CAST(" + q + " AS BIGINT) AS " + q
	case c.typ.Equals(iceberg.PrimitiveTypes.Timestamp):
		return "CAST(" + q + " AS TIMESTAMP) AS " + q
	}
	return q
}

// readSQL is the column read back from a Parquet file Iceberg returned,
// in the DuckDB type idem holds.
func (c column) readSQL() string {
	q := runner.QuoteIdent(c.name)
	return "CAST(" + q + " AS " + c.duckType + ") AS " + q
}

// promotable says Iceberg's schema evolution can change a column of type
// from into to (int to long, float to double, a wider decimal).
func promotable(from, to iceberg.Type) bool {
	switch {
	case from.Equals(to):
		return true
	case from.Equals(iceberg.PrimitiveTypes.Int32) && to.Equals(iceberg.PrimitiveTypes.Int64):
		return true
	case from.Equals(iceberg.PrimitiveTypes.Float32) && to.Equals(iceberg.PrimitiveTypes.Float64):
		return true
	}
	fd, ok1 := from.(iceberg.DecimalType)
	td, ok2 := to.(iceberg.DecimalType)
	return ok1 && ok2 && fd.Scale() == td.Scale() && td.Precision() >= fd.Precision()
}

// fieldIDs is DuckDB's FIELD_IDS option for the columns, from schema.
func fieldIDs(cols []column, schema *iceberg.Schema) (string, error) {
	parts := make([]string, len(cols))
	for i, c := range cols {
		f, ok := schema.FindFieldByName(c.name)
		if !ok {
			return "", fmt.Errorf("column %s is not in the Iceberg schema", c.name)
		}
		parts[i] = runner.QuoteIdent(c.name) + ": " + strconv.Itoa(f.ID)
	}
	return "{" + strings.Join(parts, ", ") + "}", nil
}
