package lake

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
)

// Scan is what a read of one snapshot of a table reads: the snapshot's
// schema, and its live data files and delete files.
type Scan struct {
	Metadata   *Metadata
	Snapshot   *Snapshot // nil: the table has no snapshot yet (no rows)
	Schema     *Schema
	Data       []File
	PosDeletes []File
	EqDeletes  []File
}

// Plan lists the files of snapshot s of the table m. A data or delete file
// that is not Parquet (Avro, ORC, a v3 deletion vector) is refused by
// name: never read as if it were not there.
func Plan(ctx context.Context, st Store, m *Metadata, s *Snapshot) (*Scan, error) {
	schema, err := m.SchemaOf(s)
	if err != nil {
		return nil, err
	}
	sc := &Scan{Metadata: m, Snapshot: s, Schema: schema}
	if s == nil {
		return sc, nil
	}
	files, err := LiveFiles(ctx, st, m, s)
	if err != nil {
		return nil, err
	}
	for _, f := range files {
		if f.Format != "PARQUET" {
			what := map[int]string{ContentData: "data", ContentPosDeletes: "position delete", ContentEqDeletes: "equality delete"}[f.Content]
			return nil, fmt.Errorf("iceberg snapshot %d of table %s: %s file %s is %s: idem reads Parquet data and delete files only", s.ID, m.TableUUID, what, f.Location, f.Format)
		}
		switch f.Content {
		case ContentData:
			sc.Data = append(sc.Data, f)
		case ContentPosDeletes:
			sc.PosDeletes = append(sc.PosDeletes, f)
		case ContentEqDeletes:
			if len(f.EqualityIDs) == 0 {
				return nil, fmt.Errorf("iceberg snapshot %d of table %s: equality delete file %s names no equality field", s.ID, m.TableUUID, f.Location)
			}
			sc.EqDeletes = append(sc.EqDeletes, f)
		default:
			return nil, fmt.Errorf("iceberg snapshot %d of table %s: file %s has content %d, unknown to idem", s.ID, m.TableUUID, f.Location, f.Content)
		}
	}
	return sc, nil
}

// Field is the schema's field named name (nil when there is none).
func (s *Schema) Field(name string) *Field {
	for i := range s.Fields {
		if s.Fields[i].Name == name {
			return &s.Fields[i]
		}
	}
	return nil
}

// FieldByID is the schema's field id (nil when there is none).
func (s *Schema) FieldByID(id int) *Field {
	for i := range s.Fields {
		if s.Fields[i].ID == id {
			return &s.Fields[i]
		}
	}
	return nil
}

// Names are the schema's top-level column names in order.
func (s *Schema) Names() []string {
	out := make([]string, len(s.Fields))
	for i, f := range s.Fields {
		out[i] = f.Name
	}
	return out
}

var decimalType = regexp.MustCompile(`^decimal\(\s*(\d+)\s*,\s*(\d+)\s*\)$`)
var fixedType = regexp.MustCompile(`^fixed\[\d+\]$`)

// primitives maps Iceberg primitive types to DuckDB's.
var primitives = map[string]string{
	"boolean": "BOOLEAN", "int": "INTEGER", "long": "BIGINT", "float": "FLOAT", "double": "DOUBLE",
	"date": "DATE", "time": "TIME", "timestamp": "TIMESTAMP", "timestamptz": "TIMESTAMPTZ",
	"timestamp_ns": "TIMESTAMP_NS", "string": "VARCHAR", "uuid": "UUID", "binary": "BLOB",
}

// DuckDBType is the DuckDB type a field is read as. Nested types (struct,
// list, map) and types DuckDB cannot hold exactly are refused by name.
func (f *Field) DuckDBType() (string, error) {
	var t string
	if err := json.Unmarshal(f.Type, &t); err != nil {
		var nested struct {
			Type string `json:"type"`
		}
		_ = json.Unmarshal(f.Type, &nested)
		return "", fmt.Errorf("column %q is an Iceberg %s: idem reads primitive columns only", f.Name, nested.Type)
	}
	if d, ok := primitives[t]; ok {
		return d, nil
	}
	if m := decimalType.FindStringSubmatch(t); m != nil {
		return "DECIMAL(" + m[1] + "," + m[2] + ")", nil
	}
	if fixedType.MatchString(t) {
		return "BLOB", nil
	}
	return "", fmt.Errorf("column %q has Iceberg type %s, which idem does not read", f.Name, t)
}
