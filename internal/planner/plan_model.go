package planner

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"

	"github.com/idem-dev/idem/internal/catalog"
	"github.com/idem-dev/idem/internal/diff"
	"github.com/idem-dev/idem/internal/export"
	"github.com/idem-dev/idem/internal/history"
	"github.com/idem-dev/idem/internal/job"
	"github.com/idem-dev/idem/internal/run"
	"github.com/idem-dev/idem/internal/sqltext"
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
// both versions, with column-level lineage through CTEs and subqueries: a
// change that only adds columns to select lists, at any level, keeps every
// row of the others, whatever the data; any other change may change rows;
// see sameQuery), its result's columns added, removed and retyped, and
// whether the rows of the columns both have change when the previous SQL
// and the new one read the same upstream rows (those the plan pinned). Downstream, in a project, names the jobs that read the
// model (directly or not): each is rebuilt after it, since the model's new
// snapshot is their input.
type ModelChange struct {
	Class          string              `json:"class"`
	ColumnsAdded   []string            `json:"columns_added"`
	ColumnsRemoved []string            `json:"columns_removed"`
	ColumnsRetyped []diff.ColumnChange `json:"columns_retyped"`
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
	mc := &ModelChange{ColumnsAdded: []string{}, ColumnsRemoved: []string{}, ColumnsRetyped: []diff.ColumnChange{}, Downstream: []string{}}
	now := j.Expand(j.ModelSQL)
	newCols, err := run.DescribeColumns(ctx, tx, now)
	if err != nil {
		return nil, fmt.Errorf("plan: model %s: %w", j.ModelFile, err)
	}
	added, removed, retyped := diff.ColumnChanges(row.Columns, newCols)
	mc.ColumnsAdded = append(mc.ColumnsAdded, added...)
	mc.ColumnsRemoved = append(mc.ColumnsRemoved, removed...)
	mc.ColumnsRetyped = append(mc.ColumnsRetyped, retyped...)
	var common []string
	for _, c := range row.Columns {
		if !slices.Contains(removed, c.Name) && !slices.ContainsFunc(retyped, func(r diff.ColumnChange) bool { return r.Name == c.Name }) {
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
		if at, err := history.ModelAt(ctx, tx, j, row, parts); err == nil {
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
	list := export.IdentList(cols)
	a := "SELECT " + list + " FROM (\n" + before + "\n)"
	b := "SELECT " + list + " FROM (\n" + after + "\n)"
	var n int64
	cmp := "SELECT count(*) FROM (SELECT DISTINCT " + export.IdentList(key) + " FROM ((" + a + ") EXCEPT ALL (" + b + ") UNION ALL ((" + b + ") EXCEPT ALL (" + a + "))))"
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
// comments, spacing and positions do not count), with column-level
// lineage through CTEs and subqueries: the same query but for result
// columns added to select lists, at any level (the outer SELECT, a CTE, a
// subquery in FROM), keeps every row of the other columns for any data.
// It says why not otherwise: another select item, any other clause, or
// added columns that reach a SELECT DISTINCT or GROUP BY ALL (directly or
// through *), a NATURAL JOIN, or a UNION, EXCEPT or INTERSECT other than
// UNION ALL, whose rows they can change. A query DuckDB cannot serialize
// is compared as text.
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
		// The text positions and lengths move with an edit elsewhere in
		// the text, or with its spacing.
		sqltext.WalkJSON(v, func(m map[string]any) {
			delete(m, "query_location")
			delete(m, "query_location_length")
		})
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
	sa, _ := a["statements"].([]any)
	sb, _ := b["statements"].([]any)
	if len(sa) != 1 || len(sb) != 1 {
		if reflect.DeepEqual(a, b) {
			return true, "", nil
		}
		return false, "the query changed, not only its select list", nil
	}
	na, _ := sa[0].(map[string]any)
	nb, _ := sb[0].(map[string]any)
	l := &lineage{}
	if !l.same(na["node"], nb["node"], true) {
		if top, _ := nb["node"].(map[string]any); top == nil || top["type"] != "SELECT_NODE" {
			return false, "the query changed, not only its select list: " + l.reason, nil
		}
		return false, l.reason, nil
	}
	if l.inner > 0 {
		// A column added below the outer SELECT reaches whatever reads
		// that relation with *, or joins it by name.
		reason := ""
		sqltext.WalkJSON(nb["node"], func(m map[string]any) {
			switch {
			case reason != "":
			case m["ref_type"] == "NATURAL":
				reason = "a column added under a NATURAL JOIN can change what it joins on"
			case m["type"] == "SELECT_NODE" && hasStar(m) && distinctOrGroupAll(m) != "":
				reason = "a column added under " + distinctOrGroupAll(m) + " with * can change its rows"
			}
		})
		if reason != "" {
			return false, reason, nil
		}
	}
	return true, "", nil
}

// lineage compares two parse trees, before and after, allowing select
// items added to any select list; inner counts the select lists grown
// below the outer SELECT, reason says why the trees differ otherwise.
type lineage struct {
	inner  int
	reason string
}

// same compares a (before) with b (after); top is set for the outer
// query node, whose added select items are the result's added columns.
func (l *lineage) same(a, b any, top bool) bool {
	switch x := a.(type) {
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok {
			return false
		}
		if x["type"] == "SELECT_NODE" && y["type"] == "SELECT_NODE" {
			return l.sameSelect(x, y, top)
		}
		grown := l.inner
		if !l.sameClauses(x, y) {
			return false
		}
		if x["type"] == "SET_OPERATION_NODE" && l.inner > grown && (x["setop_type"] != "UNION" || x["setop_all"] != true) {
			l.reason = "columns added under a UNION, EXCEPT or INTERSECT (other than UNION ALL) can change its rows"
			return false
		}
		return true
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !l.same(x[i], y[i], false) {
				return false
			}
		}
		return true
	default:
		return reflect.DeepEqual(a, b)
	}
}

// sameClauses compares two nodes key by key (by same), but for their
// select lists.
func (l *lineage) sameClauses(x, y map[string]any) bool {
	n := 0
	for k, v := range x {
		if k == "select_list" {
			continue
		}
		w, ok := y[k]
		if !ok || !l.same(v, w, false) {
			return false
		}
		n++
	}
	_, listed := y["select_list"]
	if listed {
		n++
	}
	return n == len(y)
}

// sameSelect compares two SELECT nodes: every clause alike (each compared
// by same, so a CTE or subquery may grow too), and the select list before
// found in order in the one after.
func (l *lineage) sameSelect(x, y map[string]any, top bool) bool {
	if !l.sameClauses(x, y) {
		if l.reason == "" {
			l.reason = "the query changed beyond its select list (FROM, WHERE, GROUP BY, ...): rows may change"
		}
		return false
	}
	lx, _ := x["select_list"].([]any)
	ly, _ := y["select_list"].([]any)
	i := 0
	for _, item := range ly {
		if i < len(lx) && reflect.DeepEqual(item, lx[i]) {
			i++
		}
	}
	if i < len(lx) {
		l.reason = "a result column's expression changed or moved: its rows may change"
		return false
	}
	if len(ly) == len(lx) {
		return true
	}
	if what := distinctOrGroupAll(y); what != "" {
		l.reason = "columns added to " + what + " can change its rows"
		if what == "a GROUP BY ALL" {
			l.reason = "columns added to a GROUP BY ALL can change its groups"
		}
		return false
	}
	if !top {
		l.inner++
	}
	return true
}

// distinctOrGroupAll names what a SELECT node does with its select list
// that an added column changes the rows of: "a SELECT DISTINCT", "a GROUP
// BY ALL", or "".
func distinctOrGroupAll(node map[string]any) string {
	if mods, _ := node["modifiers"].([]any); slices.ContainsFunc(mods, func(m any) bool {
		mm, _ := m.(map[string]any)
		return mm["type"] == "DISTINCT_MODIFIER"
	}) {
		return "a SELECT DISTINCT"
	}
	if node["aggregate_handling"] == "FORCE_AGGREGATES" {
		return "a GROUP BY ALL"
	}
	return ""
}

// hasStar says whether a SELECT node's select list holds * or COLUMNS(...).
func hasStar(node map[string]any) bool {
	list, _ := node["select_list"].([]any)
	return slices.ContainsFunc(list, func(item any) bool {
		m, _ := item.(map[string]any)
		return m["class"] == "STAR"
	})
}
