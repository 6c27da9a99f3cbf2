package sqltext

import (
	"fmt"
	"github.com/idem-dev/idem/internal/report"
	"strings"
)

// A query whose result does not depend on the order its rows arrive in
// gives the same bytes on any number of DuckDB threads, so it may run on
// the job's threads rather than on one. OrderFree proves that from
// DuckDB's bound plan of the query (json_serialize_plan: operators,
// expressions and their types), conservatively: what it cannot prove
// keeps the query on one thread.

// orderFreeOperators are the plan operators whose output, as a set of
// rows, does not depend on the order of their input rows.
var orderFreeOperators = map[string]bool{
	"LOGICAL_PROJECTION": true, "LOGICAL_FILTER": true, "LOGICAL_AGGREGATE_AND_GROUP_BY": true,
	"LOGICAL_WINDOW": true, "LOGICAL_GET": true, "LOGICAL_COMPARISON_JOIN": true, "LOGICAL_ANY_JOIN": true,
	"LOGICAL_CROSS_PRODUCT": true, "LOGICAL_DELIM_JOIN": true, "LOGICAL_DEPENDENT_JOIN": true,
	"LOGICAL_UNION": true, "LOGICAL_EXCEPT": true, "LOGICAL_INTERSECT": true, "LOGICAL_ORDER_BY": true,
	"LOGICAL_DUMMY_SCAN": true, "LOGICAL_EXPRESSION_GET": true, "LOGICAL_CREATE_TABLE": true,
	"LOGICAL_MATERIALIZED_CTE": true, "LOGICAL_CTE_REF": true, "LOGICAL_RECURSIVE_CTE": true,
	"LOGICAL_UNNEST": true, "LOGICAL_DISTINCT": true, "LOGICAL_INSERT": true, "LOGICAL_EMPTY_RESULT": true,
	"LOGICAL_CHUNK_GET": true, "LOGICAL_COLUMN_DATA_GET": true,
}

// orderFreeAggregates give the same value whatever the order of their
// input: exactly, for any type.
var orderFreeAggregates = map[string]bool{
	"count": true, "count_star": true, "min": true, "max": true, "bool_and": true, "bool_or": true,
	"bit_and": true, "bit_or": true, "bit_xor": true, "count_if": true, "countif": true,
}

// exactSumAggregates are exact when every argument is an integer or a
// DECIMAL (their sum is exact, so its order does not matter); a sum of
// DOUBLE or REAL rounds after every addition, in input order.
var exactSumAggregates = map[string]bool{
	"sum": true, "avg": true, "mean": true, "sum_no_overflow": true, "favg": false,
}

// exactTypes are the types whose sums are exact.
var exactTypes = map[string]bool{
	"TINYINT": true, "SMALLINT": true, "INTEGER": true, "BIGINT": true, "HUGEINT": true,
	"UTINYINT": true, "USMALLINT": true, "UINTEGER": true, "UBIGINT": true, "UHUGEINT": true,
	"DECIMAL": true, "BOOLEAN": true,
}

// orderFreeWindows do not depend on how rows that tie on the window's
// ORDER BY are ordered.
var orderFreeWindows = map[string]bool{
	"WINDOW_RANK": true, "WINDOW_RANK_DENSE": true, "WINDOW_PERCENT_RANK": true, "WINDOW_CUME_DIST": true,
}

// OrderFree reports whether the bound plans (json_serialize_plan's
// "plans") give a result that does not depend on the order their rows
// arrive in; why names the first construct that may, when not.
func OrderFree(plans []any) (ok bool, why string) {
	var walk func(v any) string
	walk = func(v any) string {
		switch x := v.(type) {
		case []any:
			for _, e := range x {
				if w := walk(e); w != "" {
					return w
				}
			}
		case map[string]any:
			if t, _ := x["type"].(string); strings.HasPrefix(t, "LOGICAL_") {
				if !orderFreeOperators[t] {
					return strings.ToLower(strings.TrimPrefix(t, "LOGICAL_"))
				}
				if t == "LOGICAL_DISTINCT" && x["distinct_type"] != "DISTINCT" {
					return "DISTINCT ON"
				}
			}
			switch x["expression_class"] {
			case "BOUND_AGGREGATE":
				if w := aggregateOrder(x); w != "" {
					return w
				}
			case "BOUND_WINDOW":
				if w := windowOrder(x); w != "" {
					return w
				}
			}
			for _, k := range report.SortedKeys(x) {
				if w := walk(x[k]); w != "" {
					return w
				}
			}
		}
		return ""
	}
	if len(plans) == 0 {
		return false, "no plan"
	}
	if w := walk(plans); w != "" {
		return false, w
	}
	return true, ""
}

// aggregateOrder is why an aggregate's value may depend on its input's
// order, or "".
func aggregateOrder(x map[string]any) string {
	name := strings.ToLower(functionName(x))
	if ob, ok := x["order_bys"].(map[string]any); ok {
		if orders, _ := ob["orders"].([]any); len(orders) > 0 {
			return name + "() with ORDER BY" // ties keep their arrival order
		}
	}
	if orderFreeAggregates[name] {
		return ""
	}
	if exactSumAggregates[name] {
		args, _ := x["arguments"].([]any)
		for _, a := range args {
			am, _ := a.(map[string]any)
			if id, _ := am["id"].(string); !exactTypes[id] {
				return fmt.Sprintf("%s() of %s", name, strings.ToLower(id))
			}
		}
		return ""
	}
	return name + "()"
}

// windowOrder is why a window function's value may depend on the order
// of rows that tie, or "".
func windowOrder(x map[string]any) string {
	t, _ := x["type"].(string)
	if orderFreeWindows[t] {
		return ""
	}
	if t == "WINDOW_AGGREGATE" {
		if orders, _ := x["orders"].([]any); len(orders) > 0 {
			return "an aggregate window with ORDER BY"
		}
		if orders, _ := x["arg_orders"].([]any); len(orders) > 0 {
			return strings.ToLower(functionName(x)) + "() with ORDER BY"
		}
		return aggregateOrder(map[string]any{"name": functionName(x), "arguments": x["arguments"]})
	}
	return strings.ToLower(strings.TrimPrefix(t, "WINDOW_"))
}

// functionName is a bound function's name: "name" in DuckDB 1.5's plans,
// the last part of "qname"'s path in 2.0's.
func functionName(x map[string]any) string {
	if name, _ := x["name"].(string); name != "" {
		return name
	}
	qn, _ := x["qname"].(map[string]any)
	path, _ := qn["path"].([]any)
	if len(path) == 0 {
		return ""
	}
	name, _ := path[len(path)-1].(string)
	return name
}
