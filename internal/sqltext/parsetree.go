package sqltext

import (
	"fmt"
	"github.com/idem-dev/idem/internal/report"
	"strings"
)

// DuckDB's parse tree (json_serialize_sql) changed shape in 2.0; these
// read a node the way each version writes it, so that a check does not
// silently see nothing where the other version put it.

// CTEQuery is the query node of a common table expression's entry in a
// cte_map (the entry's "value"): 2.0's query_node, or 1.5's query.node.
func CTEQuery(value map[string]any) map[string]any {
	if n, ok := value["query_node"].(map[string]any); ok {
		return n
	}
	q, _ := value["query"].(map[string]any)
	n, _ := q["node"].(map[string]any)
	return n
}

// ConstantText is the value of a CONSTANT expression as text, and false
// for NULL or a node that is not a constant: 2.0's literal.text, or 1.5's
// value.value.
func ConstantText(m map[string]any) (string, bool) {
	if m["class"] != "CONSTANT" {
		return "", false
	}
	if lit, ok := m["literal"].(map[string]any); ok {
		if kind, _ := lit["kind"].(string); strings.EqualFold(kind, "NULL") {
			return "", false
		}
		s, ok := lit["text"].(string)
		return s, ok
	}
	v, _ := m["value"].(map[string]any)
	if isNull, _ := v["is_null"].(bool); isNull || v == nil {
		return "", false
	}
	return fmt.Sprint(v["value"]), true
}

// typeAliases are the names DuckDB 2.0's parser keeps as written for a
// type 1.5 resolved in the parse tree.
var typeAliases = map[string]string{
	"TIMESTAMPTZ": "TIMESTAMP WITH TIME ZONE", "TIMETZ": "TIME WITH TIME ZONE",
	"TEXT": "VARCHAR", "STRING": "VARCHAR", "CHAR": "VARCHAR", "BPCHAR": "VARCHAR", "NVARCHAR": "VARCHAR",
	"LIST": "LIST",
}

// CastType is the type a CAST expression converts to, as DuckDB names it
// (INTEGER, VARCHAR, TIMESTAMP WITH TIME ZONE, LIST ...), and whether it
// holds a type with a time zone anywhere (a LIST of TIMESTAMPTZ too in
// 2.0): 2.0's type_expr, or 1.5's cast_type.
func CastType(m map[string]any) (string, bool) {
	if ct, ok := m["cast_type"].(map[string]any); ok {
		id, _ := ct["id"].(string)
		return id, strings.Contains(id, "TIME ZONE")
	}
	te, _ := m["type_expr"].(map[string]any)
	name := typeName(te)
	zoned := false
	WalkJSON(te, func(n map[string]any) {
		if n["class"] == "TYPE" && strings.Contains(typeName(n), "TIME ZONE") {
			zoned = true
		}
	})
	return name, zoned
}

func typeName(te map[string]any) string {
	name, _ := te["type_name"].(string)
	name = strings.ToUpper(name)
	if a, ok := typeAliases[name]; ok {
		return a
	}
	return name
}

// WalkJSON calls f on every object in a decoded JSON tree.
func WalkJSON(v any, f func(map[string]any)) {
	switch x := v.(type) {
	case map[string]any:
		f(x)
		for _, k := range report.SortedKeys(x) {
			WalkJSON(x[k], f)
		}
	case []any:
		for _, e := range x {
			WalkJSON(e, f)
		}
	}
}
