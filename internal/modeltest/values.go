package modeltest

import (
	"encoding/csv"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// kind is what a fixture value was written as: a TOML type, or text of a
// CSV field, whose type is read from its form.
type kind int

const (
	kindNull kind = iota
	kindString
	kindInt
	kindFloat
	kindBool
	kindDate
	kindTimestamp
	kindTime
	kindCSV
)

var kindNames = map[kind]string{kindString: "string", kindInt: "integer", kindFloat: "float", kindBool: "boolean",
	kindDate: "date", kindTimestamp: "date-time", kindTime: "time"}

// cell is one value of a fixture row: its text, which DuckDB casts to the
// column's type, or SQL NULL.
type cell struct {
	text string
	kind kind
}

func (c cell) null() bool { return c.kind == kindNull }

// arg is the cell as a bound SQL value: its text, or nil for NULL.
func (c cell) arg() any {
	if c.null() {
		return nil
	}
	return c.text
}

// valueCell turns a TOML value into a cell. A TOML local date, date-time
// or time keeps its form; a date-time with an offset becomes the same
// instant in UTC, as a TIMESTAMP (never TIMESTAMPTZ, whose text depends on
// the session's time zone). Arrays and tables are refused: give a list or
// a struct as its text ("[1, 2]"), which DuckDB casts to the column's type.
func valueCell(v any) (cell, error) {
	switch x := v.(type) {
	case string:
		return cell{x, kindString}, nil
	case int64:
		return cell{strconv.FormatInt(x, 10), kindInt}, nil
	case float64:
		switch {
		case math.IsInf(x, 1):
			return cell{"Infinity", kindFloat}, nil
		case math.IsInf(x, -1):
			return cell{"-Infinity", kindFloat}, nil
		}
		return cell{strconv.FormatFloat(x, 'f', -1, 64), kindFloat}, nil
	case bool:
		return cell{strconv.FormatBool(x), kindBool}, nil
	case time.Time:
		switch x.Location().String() {
		case "date-local":
			return cell{x.Format("2006-01-02"), kindDate}, nil
		case "datetime-local":
			return cell{x.Format("2006-01-02 15:04:05.999999999"), kindTimestamp}, nil
		case "time-local":
			return cell{x.Format("15:04:05.999999999"), kindTime}, nil
		}
		return cell{x.UTC().Format("2006-01-02 15:04:05.999999999"), kindTimestamp}, nil
	}
	return cell{}, fmt.Errorf("%s is not a value idem test reads: give a list or a struct as its text (\"[1, 2]\", \"{'a': 1}\"), which is cast to the column's type", tomlTypeName(v))
}

func tomlTypeName(v any) string {
	switch v.(type) {
	case []any, []map[string]any:
		return "an array"
	case map[string]any:
		return "a table"
	}
	return fmt.Sprintf("a %T", v)
}

// parseCSV reads a fixture given as CSV text: a header of column names,
// then one record per row. An empty field is NULL.
func parseCSV(text string) (columns []string, rows []map[string]cell, err error) {
	r := csv.NewReader(strings.NewReader(strings.TrimLeft(text, "\r\n")))
	r.FieldsPerRecord = 0
	records, err := r.ReadAll()
	if err != nil {
		return nil, nil, fmt.Errorf("csv: %w", err)
	}
	if len(records) == 0 {
		return nil, nil, fmt.Errorf("csv: no header: the first line names the columns")
	}
	columns = records[0]
	seen := map[string]bool{}
	for i, c := range columns {
		c = strings.TrimSpace(c)
		if c == "" {
			return nil, nil, fmt.Errorf("csv: column %d of the header has no name", i+1)
		}
		if seen[c] {
			return nil, nil, fmt.Errorf("csv: column %s is named twice in the header", c)
		}
		seen[c] = true
		columns[i] = c
	}
	for _, rec := range records[1:] {
		row := map[string]cell{}
		for i, f := range rec {
			if f != "" {
				row[columns[i]] = cell{f, kindCSV}
			}
		}
		rows = append(rows, row)
	}
	return columns, rows, nil
}

var (
	csvInt       = regexp.MustCompile(`^[+-]?[0-9]+$`)
	csvFloat     = regexp.MustCompile(`^[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?$`)
	csvBool      = regexp.MustCompile(`^(?i:true|false)$`)
	csvDate      = regexp.MustCompile(`^[0-9]{4}-[0-9]{2}-[0-9]{2}$`)
	csvTimestamp = regexp.MustCompile(`^[0-9]{4}-[0-9]{2}-[0-9]{2}[T ][0-9]{2}:[0-9]{2}(:[0-9]{2}(\.[0-9]+)?)?$`)
	csvTime      = regexp.MustCompile(`^[0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]+)?$`)
)

// csvKind is the kind the text of a CSV field reads as.
func csvKind(s string) kind {
	switch {
	case csvInt.MatchString(s):
		return kindInt
	case csvFloat.MatchString(s):
		return kindFloat
	case csvBool.MatchString(s):
		return kindBool
	case csvDate.MatchString(s):
		return kindDate
	case csvTimestamp.MatchString(s):
		return kindTimestamp
	case csvTime.MatchString(s):
		return kindTime
	}
	return kindString
}

// inferType is the DuckDB type of a fixture column whose type idem cannot
// know without a database (an upstream that is itself a model), from the
// values the test gives: integers BIGINT (with floats, DOUBLE), floats
// DOUBLE, booleans BOOLEAN, dates DATE, date-times TIMESTAMP, times TIME,
// strings (and a column of NULLs only) VARCHAR. CSV text is read by its
// form, and a CSV column whose fields read as different kinds is VARCHAR.
// A TOML column that mixes kinds is an error: the test says its type.
func inferType(cells []cell) (string, error) {
	seen := map[kind]bool{}
	csvText := false
	for _, c := range cells {
		switch {
		case c.null():
		case c.kind == kindCSV:
			csvText = true
			seen[csvKind(c.text)] = true
		default:
			seen[c.kind] = true
		}
	}
	if seen[kindInt] && seen[kindFloat] {
		delete(seen, kindInt)
	}
	if len(seen) > 1 {
		if csvText {
			return "VARCHAR", nil
		}
		var names []string
		for _, k := range []kind{kindString, kindInt, kindFloat, kindBool, kindDate, kindTimestamp, kindTime} {
			if seen[k] {
				names = append(names, kindNames[k])
			}
		}
		return "", fmt.Errorf("its values mix %s: give its type in types", strings.Join(names, " and "))
	}
	for k := range seen {
		switch k {
		case kindInt:
			return "BIGINT", nil
		case kindFloat:
			return "DOUBLE", nil
		case kindBool:
			return "BOOLEAN", nil
		case kindDate:
			return "DATE", nil
		case kindTimestamp:
			return "TIMESTAMP", nil
		case kindTime:
			return "TIME", nil
		}
	}
	return "VARCHAR", nil
}

// typeName is the form a type given in types must have: a DuckDB type name
// of words, with an optional (p) or (p,s) and list brackets. Types reach
// SQL as written, so nothing else is let through; DuckDB then says whether
// the name is a type.
var typeName = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_]*( [A-Za-z][A-Za-z0-9_]*)*( ?\(\s*[0-9]+\s*(,\s*[0-9]+\s*)?\))?(\[[0-9]*\])*$`)

// checkTypeName checks a type given in types.
func checkTypeName(t string) error {
	if !typeName.MatchString(strings.TrimSpace(t)) {
		return fmt.Errorf("type %q is not a DuckDB type name (BIGINT, DECIMAL(10,2), VARCHAR[], ...)", t)
	}
	u := strings.Join(strings.Fields(strings.ToUpper(t)), " ")
	if u == "TIMESTAMPTZ" || strings.HasPrefix(u, "TIMESTAMP WITH TIME ZONE") {
		return fmt.Errorf("type %s: its text depends on the session's time zone; give the instant as a TIMESTAMP in UTC", t)
	}
	return nil
}
