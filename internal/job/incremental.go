package job

import (
	"fmt"
	"github.com/idem-dev/idem/internal/jobfs"
	"github.com/idem-dev/idem/internal/report"
	"github.com/idem-dev/idem/internal/seal"
	"github.com/idem-dev/idem/internal/sqltext"
	"slices"
	"strings"
)

// Incremental models ([target] incremental). A model by partition
// (incremental = "partition", with partition_by) is recomputed, on a run
// where its upstreams moved, only for the partitions that the upstream
// rows which changed belong to: idem restricts every upstream relation to
// the rows of those partitions, runs the model's one SELECT over them and
// replaces exactly those partitions of the target. A model by key
// (incremental = "key") is the same with its key columns in place of the
// partition column: the changed upstream rows' values of the key columns
// name the keys recomputed. That gives the rows of a full rebuild only if
// every row of partition (or key) p of the result is made of upstream rows
// of p alone, which CheckIncremental proves from DuckDB's parse of the
// model, refusing what it cannot prove.

// Settings of [target] incremental.
const (
	IncrementalPartition = "partition"
	IncrementalKey       = "key"
)

// applyIncremental binds [target] incremental: a model's, by key, or by
// partition with partition_by among its key columns (so that no key can
// move between a replaced partition and a kept one).
func (j *Job) applyIncremental(data []byte, jf *jobFile) error {
	mode := jf.Target.Incremental
	if mode == "" {
		return nil
	}
	bad := jobfs.KeyErrors(j.File, data)
	switch {
	case !j.Pipeline.Model:
		return bad("target.incremental", "only a model (pipeline = \"select\") is updated incrementally; pipeline %s is not a model", j.Pipeline.Name)
	case mode == IncrementalKey:
	case mode != IncrementalPartition:
		return bad("target.incremental", "must be %q or %q (got %q)", IncrementalPartition, IncrementalKey, mode)
	case j.PartitionBy == "":
		return bad("target.incremental", "incremental = %q recomputes the partitions whose upstream rows changed: add partition_by = \"COLUMN\" to [target]", mode)
	case !slices.Contains(j.Key, j.PartitionBy):
		return bad("target.partition_by", "an incremental model's partition column must be one of its key columns (key = [%s]), so that no key moves between partitions: add %q to key",
			strings.Join(j.Key, ", "), j.PartitionBy)
	}
	j.Incremental = mode
	j.incrementalLine = jobfs.KeyLine(data, "target", "incremental")
	return nil
}

// IncrementalColumns are the columns an incremental model's runs restrict
// its upstreams by: partition_by, or its key columns (none when the model
// is not incremental).
func (j *Job) IncrementalColumns() []string {
	switch j.Incremental {
	case IncrementalPartition:
		return []string{j.PartitionBy}
	case IncrementalKey:
		return j.Key
	}
	return nil
}

// incrementalError refuses a model whose SQL cannot be restricted to the
// partitions (or keys) that changed: the job file's [target] incremental,
// the model file and line, and why.
func (j *Job) incrementalError(line int, why string) error {
	at := j.ModelFile
	if line > 0 {
		at = fmt.Sprintf("%s line %d", j.ModelFile, line)
	}
	by := "partition " + j.PartitionBy
	if j.Incremental == IncrementalKey {
		by = "key (" + strings.Join(j.Key, ", ") + ")"
	}
	return &report.JobFileError{File: j.File, Line: j.incrementalLine, Key: "target.incremental",
		Msg: fmt.Sprintf("model %s cannot be recomputed by %s: %s; refused (remove incremental to rebuild the whole model on every run)", at, by, why)}
}

// CheckIncremental proves that an incremental model's SELECT can be
// restricted to some partitions, or some keys (see the top of this file;
// the columns C below are partition_by, or every key column): parse reads
// the model with DuckDB's json_serialize_sql and aggregates names DuckDB's
// aggregate functions (lower case). It accepts SELECTs, with common table
// expressions and subqueries in FROM, built of:
//
//   - upstream relations, each read whole (its columns C are the
//     partition's or key's), joined INNER, LEFT, SEMI or ANTI on equal C
//     (ON a.p = b.p AND ..., or USING (p), for every column p of C);
//   - filters, projections and scalar functions of one row;
//   - GROUP BY lists that hold C (every grouping set), window functions
//     partitioned by C, DISTINCT and DISTINCT ON (C, ...);
//
// and whose result passes every column of C through as it was read, under
// its own name. It refuses anything else, naming the construct: a LIMIT or
// OFFSET, an aggregate without GROUP BY, a window across partitions (keys),
// a join not on C, a subquery in an expression, a set operation, a table
// function, a sample. The error is a *JobFileError naming the job file's
// [target] incremental and the model's line.
func (j *Job) CheckIncremental(parse sqltext.ParseFunc, aggregates map[string]bool) error {
	cols := j.IncrementalColumns()
	if len(cols) == 0 {
		return nil
	}
	text := j.Expand(j.ModelSQL)
	node, ok, err := parse(text)
	if err != nil {
		return err
	}
	if !ok {
		return j.incrementalError(0, "DuckDB does not parse it as one SELECT")
	}
	up := map[string]bool{}
	for _, u := range j.Input.Upstream {
		up[strings.ToLower(seal.UpstreamRelation(u))] = true
	}
	c := &restrictCheck{aggregates: aggregates, upstream: up, unit: "partition"}
	if j.Incremental == IncrementalKey {
		c.unit = "key"
	}
	for _, col := range cols {
		c.cols = append(c.cols, strings.ToLower(col))
	}
	if why, at := c.query(node, nil); why != "" {
		return j.incrementalError(lineAt(text, at), why)
	}
	return nil
}

// lineAt is the line of offset off in text (0 for none).
func lineAt(text string, off int) int {
	if off < 0 || off > len(text) {
		return 0
	}
	return strings.Count(text[:off], "\n") + 1
}

// restrictCheck proves a query node restrictable to the partitions (or
// keys: unit) named by the values of cols.
type restrictCheck struct {
	cols       []string // lower case
	unit       string   // "partition" or "key", for the reasons
	aggregates map[string]bool
	upstream   map[string]bool // the upstream relations, lower case
}

// units is "partitions" or "keys".
func (c *restrictCheck) units() string { return c.unit + "s" }

// list is the columns as a list: "day", or "a, b".
func (c *restrictCheck) list() string { return strings.Join(c.cols, ", ") }

// refusal is why a node is refused and its query location (-1: none).
type refusal struct {
	why string
	at  int
}

func location(m map[string]any) int {
	if f, ok := m["query_location"].(float64); ok && f < 1e15 {
		return int(f)
	}
	return -1
}

// query checks a query node (a SELECT, or what the model's text is) with
// the common table expressions in scope (lower-case names, all proved).
// It returns why it is refused and where, or "".
func (c *restrictCheck) query(n map[string]any, ctes map[string]bool) (string, int) {
	switch n["type"] {
	case "SELECT_NODE":
	case "SET_OPERATION_NODE":
		op, _ := n["setop_type"].(string)
		return "a set operation (" + strings.ToUpper(op) + ") combines rows idem cannot follow to one " + c.unit, -1
	case "RECURSIVE_CTE_NODE":
		return "a recursive common table expression", -1
	default:
		return fmt.Sprintf("a %v query", n["type"]), -1
	}
	scope := map[string]bool{}
	for k, v := range ctes {
		scope[k] = v
	}
	if cm, _ := n["cte_map"].(map[string]any); cm != nil {
		entries, _ := cm["map"].([]any)
		for _, e := range entries {
			em, _ := e.(map[string]any)
			name, _ := em["key"].(string)
			val, _ := em["value"].(map[string]any)
			if al, _ := val["aliases"].([]any); len(al) > 0 {
				return "common table expression " + name + " renames its columns", -1
			}
			inner := sqltext.CTEQuery(val)
			if why, at := c.query(inner, scope); why != "" {
				return "in common table expression " + name + ": " + why, at
			}
			scope[strings.ToLower(name)] = true
		}
	}
	mods, _ := n["modifiers"].([]any)
	for _, m := range mods {
		mm, _ := m.(map[string]any)
		switch mm["type"] {
		case "LIMIT_MODIFIER", "LIMIT_PERCENT_MODIFIER":
			return "LIMIT or OFFSET picks rows across " + c.units(), c.firstLocation(mm)
		case "DISTINCT_MODIFIER":
			on, _ := mm["distinct_on_targets"].([]any)
			if miss := c.missing(on); len(on) > 0 && miss != "" {
				return "DISTINCT ON without " + miss + " picks one row across " + c.units(), c.firstLocation(mm)
			}
		}
	}
	if n["sample"] != nil {
		return "a sample picks rows across " + c.units(), -1
	}
	from, _ := n["from_table"].(map[string]any)
	_, single, why, at := c.tableRef(from, scope)
	if why != "" {
		return why, at
	}
	// Expressions: no subquery anywhere, every window partitioned by the
	// columns.
	exprs := []any{n["select_list"], n["where_clause"], n["group_expressions"], n["having"], n["qualify"], mods}
	for _, e := range exprs {
		if r := c.expressions(e); r.why != "" {
			return r.why, r.at
		}
	}
	// Grouping: an aggregate (or HAVING) needs GROUP BY with the column.
	list, _ := n["select_list"].([]any)
	if why, at := c.grouping(n, list); why != "" {
		return why, at
	}
	return c.output(list, single)
}

// tableRef checks a FROM item and returns the aliases it exposes (lower
// case) and whether it is a single relation (no join).
func (c *restrictCheck) tableRef(t map[string]any, scope map[string]bool) (aliases []string, single bool, why string, at int) {
	if t == nil {
		return nil, false, "it reads no upstream", -1
	}
	at = location(t)
	if t["sample"] != nil {
		return nil, false, "a sample picks rows across " + c.units(), at
	}
	alias, _ := t["alias"].(string)
	switch t["type"] {
	case "BASE_TABLE":
		name, _ := t["table_name"].(string)
		schema, _ := t["schema_name"].(string)
		l := strings.ToLower(name)
		// {{upstream:JOB}} reads temp.idem_upstream_JOB.
		if !(schema == "" && scope[l]) && !((schema == "" || strings.EqualFold(schema, "temp")) && c.upstream[l]) {
			return nil, false, "it reads " + name + ", which is neither an upstream nor a common table expression of the model", at
		}
		if ca, _ := t["column_name_alias"].([]any); len(ca) > 0 {
			return nil, false, "it renames the columns of " + name, at
		}
		if alias == "" {
			alias = name
		}
		return []string{strings.ToLower(alias)}, true, "", -1
	case "SUBQUERY":
		sub, _ := t["subquery"].(map[string]any)
		inner, _ := sub["node"].(map[string]any)
		if why, at := c.query(inner, scope); why != "" {
			return nil, false, why, at
		}
		if ca, _ := t["column_name_alias"].([]any); len(ca) > 0 {
			return nil, false, "it renames the columns of a subquery", at
		}
		return []string{strings.ToLower(alias)}, true, "", -1
	case "JOIN":
		if rt, _ := t["ref_type"].(string); rt != "REGULAR" {
			return nil, false, strings.ToUpper(rt) + " join: only joins on equal " + c.list() + " keep " + c.units() + " apart", at
		}
		jt, _ := t["join_type"].(string)
		switch jt {
		case "INNER", "LEFT", "SEMI", "ANTI":
		default:
			return nil, false, jt + " join: only INNER, LEFT, SEMI and ANTI joins on equal " + c.list() + " are recomputed by " + c.unit, at
		}
		left, _ := t["left"].(map[string]any)
		right, _ := t["right"].(map[string]any)
		la, _, why, wat := c.tableRef(left, scope)
		if why != "" {
			return nil, false, why, wat
		}
		ra, _, why, wat := c.tableRef(right, scope)
		if why != "" {
			return nil, false, why, wat
		}
		if r := c.expressions(t["condition"]); r.why != "" {
			return nil, false, r.why, r.at
		}
		using, _ := t["using_columns"].([]any)
		cond, _ := t["condition"].(map[string]any)
		for _, col := range c.cols {
			joined := false
			for _, u := range using {
				if s, _ := u.(string); strings.EqualFold(s, col) {
					joined = true
				}
			}
			if !joined && !c.equiJoin(cond, col, la, ra) {
				eq := make([]string, len(c.cols))
				for i, k := range c.cols {
					eq[i] = "a." + k + " = b." + k
				}
				return nil, false, "a join not on equal " + col + " (write ON " + strings.Join(eq, " AND ") + " AND ..., or USING (" + c.list() + "))", at
			}
		}
		return append(la, ra...), false, "", -1
	}
	return nil, false, fmt.Sprintf("FROM %v: only upstream relations, common table expressions, subqueries and joins are recomputed by %s", t["type"], c.unit), at
}

// equiJoin says whether cond holds, as one of its top-level AND terms,
// left.col = right.col with one side qualified by an alias of each side.
func (c *restrictCheck) equiJoin(cond map[string]any, col string, left, right []string) bool {
	if cond == nil {
		return false
	}
	if cond["type"] == "CONJUNCTION_AND" {
		kids, _ := cond["children"].([]any)
		for _, k := range kids {
			if km, _ := k.(map[string]any); c.equiJoin(km, col, left, right) {
				return true
			}
		}
		return false
	}
	if cond["type"] != "COMPARE_EQUAL" && cond["type"] != "COMPARE_NOT_DISTINCT_FROM" {
		return false
	}
	side := func(x any) string {
		m, _ := x.(map[string]any)
		names, _ := m["column_names"].([]any)
		if m["class"] != "COLUMN_REF" || len(names) != 2 {
			return ""
		}
		q, _ := names[0].(string)
		name, _ := names[1].(string)
		if !strings.EqualFold(name, col) {
			return ""
		}
		q = strings.ToLower(q)
		switch {
		case slices.Contains(left, q) && !slices.Contains(right, q):
			return "l"
		case slices.Contains(right, q) && !slices.Contains(left, q):
			return "r"
		}
		return ""
	}
	a, b := side(cond["left"]), side(cond["right"])
	return a != "" && b != "" && a != b
}

// expressions refuses a subquery anywhere in v and a window not
// partitioned by the columns.
func (c *restrictCheck) expressions(v any) refusal {
	out := refusal{}
	sqltext.WalkJSON(v, func(m map[string]any) {
		if out.why != "" {
			return
		}
		switch m["class"] {
		case "SUBQUERY":
			out = refusal{"a subquery in an expression can read rows of every " + c.unit, location(m)}
		case "WINDOW":
			parts, _ := m["partitions"].([]any)
			if miss := c.missing(parts); miss != "" {
				name, _ := m["function_name"].(string)
				out = refusal{"window function " + name + "() is not partitioned by " + miss + " (add PARTITION BY " + c.list() + ")", location(m)}
			}
		}
	})
	return out
}

// missing is the first of the columns that a list of expressions holds no
// plain reference to ("" when it holds them all).
func (c *restrictCheck) missing(list []any) string {
	for _, col := range c.cols {
		if !slices.ContainsFunc(list, func(e any) bool { return isColumn(e, col) }) {
			return col
		}
	}
	return ""
}

// isColumn says whether e is a plain reference to column col (qualified
// or not).
func isColumn(e any, col string) bool {
	m, _ := e.(map[string]any)
	names, _ := m["column_names"].([]any)
	if m["class"] != "COLUMN_REF" || len(names) == 0 || len(names) > 2 {
		return false
	}
	s, _ := names[len(names)-1].(string)
	return strings.EqualFold(s, col)
}

// grouping refuses an aggregate query without GROUP BY, or one whose
// GROUP BY (every grouping set) leaves one of the columns out.
func (c *restrictCheck) grouping(n map[string]any, list []any) (string, int) {
	if n["aggregate_handling"] == "FORCE_AGGREGATES" {
		return "", -1 // GROUP BY ALL: the columns, selected plainly, are grouped
	}
	groups, _ := n["group_expressions"].([]any)
	if len(groups) == 0 {
		agg := refusal{}
		for _, e := range []any{list, n["having"], n["qualify"]} {
			c.walkOutsideWindows(e, func(m map[string]any) {
				if name, _ := m["function_name"].(string); agg.why == "" && m["class"] == "FUNCTION" && c.aggregates[strings.ToLower(name)] {
					agg = refusal{"aggregate " + name + "() without GROUP BY " + c.list() + " adds up rows of every " + c.unit, location(m)}
				}
			})
		}
		if agg.why == "" && n["having"] != nil {
			agg = refusal{"HAVING without GROUP BY " + c.list() + " groups rows of every " + c.unit, -1}
		}
		return agg.why, agg.at
	}
	sets, _ := n["group_sets"].([]any)
	for _, col := range c.cols {
		var idx []int // where col is among the groups
		for i, g := range groups {
			if isColumn(g, col) {
				idx = append(idx, i)
			}
		}
		if len(idx) == 0 {
			return "GROUP BY without " + col + " adds up rows of several " + c.units(), location(groups[0].(map[string]any))
		}
		for _, s := range sets {
			ids, _ := s.([]any)
			if !slices.ContainsFunc(ids, func(id any) bool { f, _ := id.(float64); return slices.Contains(idx, int(f)) }) {
				return "a grouping set without " + col + " (ROLLUP, CUBE, GROUPING SETS) adds up rows of several " + c.units(), -1
			}
		}
	}
	return "", -1
}

// walkOutsideWindows is WalkJSON that does not enter window expressions
// (an aggregate there is a window aggregate, checked by expressions).
func (c *restrictCheck) walkOutsideWindows(v any, f func(map[string]any)) {
	switch x := v.(type) {
	case map[string]any:
		if x["class"] == "WINDOW" {
			return
		}
		f(x)
		for _, k := range report.SortedKeys(x) {
			c.walkOutsideWindows(x[k], f)
		}
	case []any:
		for _, e := range x {
			c.walkOutsideWindows(e, f)
		}
	}
}

// output requires the select list to pass each column through under its
// own name: a plain reference (alias none or the column's), or a star over
// a single relation that keeps it; and no other item named like it.
func (c *restrictCheck) output(list []any, single bool) (string, int) {
	for _, col := range c.cols {
		passed := false
		for _, e := range list {
			m, _ := e.(map[string]any)
			alias, _ := m["alias"].(string)
			switch {
			case isColumn(m, col) && (alias == "" || strings.EqualFold(alias, col)):
				passed = true
			case m["class"] == "STAR":
				if !starKeeps(m, col, single) {
					return "SELECT * here (over a join, or excluding, replacing or renaming " + col + ") does not pass " + col + " through as read: name it", location(m)
				}
				passed = true
			case strings.EqualFold(alias, col):
				return "the result's " + col + " is computed, not the upstream column " + col + " as read", location(m)
			}
		}
		if !passed {
			return "the result has no column " + col + " read as is from the upstream column of that name", -1
		}
	}
	return "", -1
}

// starKeeps says whether a star expression passes column col through.
func starKeeps(m map[string]any, col string, single bool) bool {
	if !single || m["columns"] == true || m["expr"] != nil {
		return false
	}
	for _, k := range []string{"replace_list", "qualified_exclude_list", "rename_list"} {
		l, _ := m[k].([]any)
		if len(l) > 0 {
			return false // conservative: any of these on a star
		}
	}
	ex, _ := m["exclude_list"].([]any)
	for _, e := range ex {
		if s, ok := e.(string); !ok || strings.EqualFold(s, col) {
			return false
		}
	}
	return true
}

// firstLocation is the first query location found under v.
func (c *restrictCheck) firstLocation(v any) int {
	at := -1
	sqltext.WalkJSON(v, func(m map[string]any) {
		if l := location(m); at < 0 && l >= 0 {
			at = l
		}
	})
	return at
}
