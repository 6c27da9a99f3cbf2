package ops

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"

	"github.com/idem-dev/idem/internal/catalog"
	"github.com/idem-dev/idem/internal/job"
	"github.com/idem-dev/idem/internal/run"
)

// Classes of a model's change in a plan.
const (
	// ChangeNonBreaking: columns were only added, and the columns the
	// latest snapshot has keep every row's value on the same inputs.
	ChangeNonBreaking = "non-breaking"
	// ChangeBreaking: a column was removed or retyped, or rows of the
	// columns kept change (or could not be compared).
	ChangeBreaking = "breaking"
)

// ModelChange is how a plan classifies a change of a model's SQL against
// its latest snapshot, SQLMesh's way: by the SQL itself (DuckDB's parse of
// both versions: a change that only appends result columns to the same
// query keeps every row of the others, whatever the data; any other change
// may change rows), its result's columns added, removed and retyped, and
// whether the rows of the columns both have change when the previous SQL
// and the new one read the same upstream rows (those the plan pinned). Downstream, in a project, names the jobs that read the
// model (directly or not): each is rebuilt after it, since the model's new
// snapshot is their input.
type ModelChange struct {
	Class          string         `json:"class"`
	ColumnsAdded   []string       `json:"columns_added"`
	ColumnsRemoved []string       `json:"columns_removed"`
	ColumnsRetyped []ColumnChange `json:"columns_retyped"`
	// RowsCompared says both SQL texts were run on the same upstream rows;
	// RowsChanged then counts the keys whose rows differ in the columns
	// both results have.
	RowsCompared bool     `json:"rows_compared"`
	RowsChanged  int64    `json:"rows_changed"`
	Reason       string   `json:"reason"`
	Downstream   []string `json:"downstream"`
}

// classifyModel compares model j as it would run (its upstreams pinned in
// tx by the plan's decide) with the version that built its latest snapshot.
func classifyModel(ctx context.Context, tx *sql.Tx, j *job.Job, latest int64) (*ModelChange, error) {
	row, err := catalog.ReadSnapshot(ctx, tx, j.Name, latest)
	if err != nil {
		return nil, err
	}
	mc := &ModelChange{ColumnsAdded: []string{}, ColumnsRemoved: []string{}, ColumnsRetyped: []ColumnChange{}, Downstream: []string{}}
	now := j.Expand(j.ModelSQL)
	newCols, err := run.DescribeColumns(ctx, tx, now)
	if err != nil {
		return nil, fmt.Errorf("plan: model %s: %w", j.ModelFile, err)
	}
	added, removed, retyped := columnChanges(row.Columns, newCols)
	mc.ColumnsAdded = append(mc.ColumnsAdded, added...)
	mc.ColumnsRemoved = append(mc.ColumnsRemoved, removed...)
	mc.ColumnsRetyped = append(mc.ColumnsRetyped, retyped...)
	var common []string
	for _, c := range row.Columns {
		if !slices.Contains(removed, c.Name) && !slices.ContainsFunc(retyped, func(r ColumnChange) bool { return r.Name == c.Name }) {
			common = append(common, c.Name)
		}
	}
	var why []string
	if n := len(mc.ColumnsRemoved); n > 0 {
		why = append(why, fmt.Sprintf("%d column(s) removed", n))
	}
	if n := len(mc.ColumnsRetyped); n > 0 {
		why = append(why, fmt.Sprintf("%d column(s) retyped", n))
	}
	previous := ""
	if parts, err := row.Parts(); err == nil {
		if at, err := modelAt(ctx, tx, j, row, parts); err == nil {
			previous = at.Expand(at.ModelSQL)
		}
	}
	keys := slices.Clone(j.Key)
	for _, k := range keys {
		if !slices.Contains(common, k) {
			keys = nil // a key column removed or retyped: rows pair by no key
		}
	}
	if previous != "" {
		same, reason, err := sameQuery(ctx, tx, previous, now)
		if err != nil {
			return nil, err
		}
		if !same {
			why = append(why, reason)
		}
	}
	switch {
	case previous == "":
		why = append(why, "rows not compared: the SQL of snapshot "+fmt.Sprint(latest)+" is neither kept by the database nor in the model's files")
	case len(common) == 0 || len(keys) == 0:
		why = append(why, "rows not compared: the key's columns changed")
	default:
		n, err := rowsChanged(ctx, tx, previous, now, common, keys)
		if err != nil {
			return nil, fmt.Errorf("plan: model %s: compare rows: %w", j.Name, err)
		}
		mc.RowsCompared, mc.RowsChanged = true, n
		if n > 0 {
			why = append(why, fmt.Sprintf("rows of %d key(s) change", n))
		}
	}
	mc.Class = ChangeNonBreaking
	if len(why) > 0 {
		mc.Class = ChangeBreaking
		mc.Reason = strings.Join(why, "; ")
	} else if len(mc.ColumnsAdded) > 0 {
		mc.Reason = fmt.Sprintf("%d column(s) added; the other columns keep every row", len(mc.ColumnsAdded))
	} else {
		mc.Reason = "same columns and rows on the pinned upstream rows"
	}
	return mc, nil
}

// rowsChanged counts the keys whose rows differ between two SELECTs in
// the columns cols, run on one thread over the same pinned upstream rows
// (as a run's steps are: the same SQL then gives the same values).
func rowsChanged(ctx context.Context, tx *sql.Tx, before, after string, cols, key []string) (int64, error) {
	if _, err := tx.ExecContext(ctx, "SET threads = 1"); err != nil {
		return 0, err
	}
	list := identList(cols)
	a := "SELECT " + list + " FROM (\n" + before + "\n)"
	b := "SELECT " + list + " FROM (\n" + after + "\n)"
	var n int64
	cmp := "SELECT count(*) FROM (SELECT DISTINCT " + identList(key) + " FROM ((" + a + ") EXCEPT ALL (" + b + ") UNION ALL ((" + b + ") EXCEPT ALL (" + a + "))))"
	if err := run.OneStatement(cmp); err != nil {
		return 0, err
	}
	err := tx.QueryRowContext(ctx, cmp).Scan(&n)
	if err != nil {
		return 0, catalog.TrimSQLError(err)
	}
	return n, nil
}

// sameQuery compares two SELECTs as DuckDB parses them (json_serialize_sql;
// comments, spacing and positions do not count): the same query but for
// result columns appended to its select list keeps every row of the other
// columns for any data. It says why not otherwise: another select item,
// any other clause, or appended columns to a SELECT DISTINCT or GROUP BY
// ALL, whose rows they can change. A query DuckDB cannot serialize is
// compared as text.
func sameQuery(ctx context.Context, tx *sql.Tx, before, after string) (bool, string, error) {
	parse := func(q string) (map[string]any, error) {
		var text string
		if err := tx.QueryRowContext(ctx, "SELECT CAST(json_serialize_sql(CAST(? AS VARCHAR)) AS VARCHAR)", q).Scan(&text); err != nil {
			return nil, catalog.TrimSQLError(err)
		}
		var v map[string]any
		if err := json.Unmarshal([]byte(text), &v); err != nil {
			return nil, err
		}
		if e, _ := v["error"].(bool); e {
			return nil, nil
		}
		// The text positions move with an edit elsewhere in the text.
		job.WalkJSON(v, func(m map[string]any) { delete(m, "query_location") })
		return v, nil
	}
	a, err := parse(before)
	if err != nil {
		return false, "", err
	}
	b, err := parse(after)
	if err != nil {
		return false, "", err
	}
	if a == nil || b == nil {
		if strings.TrimSpace(before) == strings.TrimSpace(after) {
			return true, "", nil
		}
		return false, "the SQL changed (DuckDB cannot serialize it to compare its parts)", nil
	}
	na, nb := selectNode(a), selectNode(b)
	if na == nil || nb == nil {
		if reflect.DeepEqual(a, b) {
			return true, "", nil
		}
		return false, "the query changed, not only its select list", nil
	}
	la, _ := na["select_list"].([]any)
	lb, _ := nb["select_list"].([]any)
	restA, restB := maps.Clone(na), maps.Clone(nb)
	delete(restA, "select_list")
	delete(restB, "select_list")
	if !reflect.DeepEqual(restA, restB) {
		return false, "the query changed beyond its select list (FROM, WHERE, GROUP BY, ...): rows may change", nil
	}
	i := 0
	for _, item := range lb {
		if i < len(la) && reflect.DeepEqual(item, la[i]) {
			i++
		}
	}
	if i < len(la) {
		return false, "a result column's expression changed or moved: its rows may change", nil
	}
	if len(lb) > len(la) {
		if mods, _ := nb["modifiers"].([]any); slices.ContainsFunc(mods, func(m any) bool {
			mm, _ := m.(map[string]any)
			return mm["type"] == "DISTINCT_MODIFIER"
		}) {
			return false, "columns added to a SELECT DISTINCT can change its rows", nil
		}
		if nb["aggregate_handling"] == "FORCE_AGGREGATES" {
			return false, "columns added to a GROUP BY ALL can change its groups", nil
		}
	}
	return true, "", nil
}

// selectNode is the SELECT node of a parse with one statement, or nil.
func selectNode(v map[string]any) map[string]any {
	stmts, _ := v["statements"].([]any)
	if len(stmts) != 1 {
		return nil
	}
	st, _ := stmts[0].(map[string]any)
	node, _ := st["node"].(map[string]any)
	if node == nil || node["type"] != "SELECT_NODE" {
		return nil
	}
	return node
}
