package runner

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// Quality rules.
//
// The convention: the first step of a transform (the stage step) leaves temp
// table staged with a column reason, NULL for a row that is valid so far.
// Right after that step the runner sets reason to 'invalid_rule:<name>' on
// every row whose reason is still NULL and for which a rule is not true
// (false or NULL), naming the first such rule in file order. The later steps
// already give a row with a reason that reason as its outcome and leave it
// out of the target, so a quarantined row is kept in the outcomes table with
// its values, and accepted plus quarantined rows equal rows read.
//
// A rule is one SQL expression over staged's columns (for merge_by_key: the
// declared input columns, typed). It is checked when the job is loaded: it
// must parse as a single expression (json_serialize_sql), hold no subquery
// and no non-deterministic function, and bind as a BOOLEAN against the
// staged table that the stage step builds from an empty input in a scratch
// in-memory database.

// RulePrefix starts the outcome of a row quarantined by a quality rule.
const RulePrefix = "invalid_rule:"

// applyRules tags the staged rows that fail a rule. It is a no-op for a job
// without rules.
func applyRules(ctx context.Context, tx *sql.Tx, job *Job) error {
	if len(job.Rules) == 0 {
		return nil
	}
	var cases, fails []string
	args := make([]any, 0, len(job.Rules))
	for _, r := range job.Rules {
		// The rule text is SQL by nature; it was parsed and bound when the
		// job was loaded and cannot hold a second statement or a subquery.
		cond := "(" + r.SQL + ") IS NOT TRUE"
		cases = append(cases, "WHEN "+cond+" THEN ?")
		fails = append(fails, cond)
		args = append(args, RulePrefix+r.Name)
	}
	q := "UPDATE staged SET reason = CASE " + strings.Join(cases, " ") + " END WHERE reason IS NULL AND (" + strings.Join(fails, " OR ") + ")"
	if _, err := tx.ExecContext(ctx, q, args...); err != nil {
		return fmt.Errorf("apply quality rules of job %s: %w", job.Name, trimSQLError(err))
	}
	return nil
}

// validateRules checks every rule of job and returns the index of the first
// bad one with the reason.
func validateRules(ctx context.Context, job *Job) (int, error) {
	db, err := open(ctx, "?autoinstall_known_extensions=false&threads=1")
	if err != nil {
		return 0, fmt.Errorf("open scratch database to check quality rules: %w", err)
	}
	defer db.Close()
	conn, err := db.Conn(ctx)
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	for i, r := range job.Rules {
		if err := checkRuleShape(ctx, conn, r); err != nil {
			return i, fmt.Errorf("rule %s: %w", r.Name, err)
		}
	}
	cols, err := dryStage(ctx, conn, job)
	if err != nil {
		return 0, fmt.Errorf("quality rules need the stage step (%s) to build temp table staged with a reason column: %w", job.Steps[0].Name, err)
	}
	for i, r := range job.Rules {
		var name, typ string
		var null, key, def, extra sql.NullString
		err := conn.QueryRowContext(ctx, "DESCRIBE SELECT ("+r.SQL+") AS idem_rule FROM staged WHERE ("+r.SQL+") IS NULL").
			Scan(&name, &typ, &null, &key, &def, &extra)
		if err != nil {
			return i, fmt.Errorf("rule %s: %s (staged columns: %s)", r.Name, firstLine(err), strings.Join(cols, ", "))
		}
		if typ != "BOOLEAN" {
			return i, fmt.Errorf("rule %s: the expression is %s, not BOOLEAN", r.Name, typ)
		}
	}
	return 0, nil
}

// checkRuleShape parses the rule inside a fixed SELECT and requires that the
// parse is exactly that SELECT with one expression: text that closes the
// parenthesis to add clauses or statements is refused.
func checkRuleShape(ctx context.Context, conn *sql.Conn, r Rule) error {
	if strings.Contains(r.SQL, ";") {
		return errors.New("a rule is one SQL expression; ';' is not allowed")
	}
	if !balanced(r.SQL) {
		return errors.New("not a single SQL expression: unbalanced parentheses")
	}
	var text string
	if err := conn.QueryRowContext(ctx, "SELECT CAST(json_serialize_sql(?::VARCHAR) AS VARCHAR)", "SELECT ("+r.SQL+") AS idem_rule FROM staged").Scan(&text); err != nil {
		return fmt.Errorf("parse: %w", err)
	}
	var parsed struct {
		Error      bool   `json:"error"`
		Message    string `json:"error_message"`
		Statements []struct {
			Node map[string]any `json:"node"`
		} `json:"statements"`
	}
	if err := json.Unmarshal([]byte(text), &parsed); err != nil {
		return fmt.Errorf("parse: %w", err)
	}
	if parsed.Error {
		return fmt.Errorf("not a SQL expression: %s", parsed.Message)
	}
	if len(parsed.Statements) != 1 {
		return errors.New("not a single SQL expression")
	}
	n := parsed.Statements[0].Node
	from, _ := n["from_table"].(map[string]any)
	list, _ := n["select_list"].([]any)
	mods, _ := n["modifiers"].([]any)
	groups, _ := n["group_expressions"].([]any)
	cte, _ := n["cte_map"].(map[string]any)
	ctes, _ := cte["map"].([]any)
	if n["type"] != "SELECT_NODE" || len(list) != 1 || from == nil || from["table_name"] != "staged" ||
		n["where_clause"] != nil || n["having"] != nil || n["qualify"] != nil || len(mods) != 0 || len(groups) != 0 || len(ctes) != 0 {
		return errors.New("not a single SQL expression over the staged columns")
	}
	var problem error
	walkJSON(list[0], func(m map[string]any) {
		if problem != nil {
			return
		}
		switch m["class"] {
		case "SUBQUERY":
			problem = errors.New("a rule may not hold a subquery: it checks one row's columns")
		case "WINDOW":
			problem = errors.New("a rule may not hold a window function: it checks one row's columns")
		case "FUNCTION":
			if name, _ := m["function_name"].(string); nondeterministic[strings.ToLower(name)] {
				problem = fmt.Errorf("a rule may not call %s(): the same row must always pass or fail", name)
			}
		case "COLUMN_REF":
			if names, _ := m["column_names"].([]any); len(names) == 1 {
				if s, _ := names[0].(string); nondeterministicRefs[strings.ToLower(s)] {
					problem = fmt.Errorf("a rule may not read %s: the same row must always pass or fail", s)
				}
			}
		}
	})
	return problem
}

// balanced reports whether the parentheses of an expression balance,
// outside string literals and quoted identifiers, so that the rule cannot
// close the parenthesis it is wrapped in.
func balanced(expr string) bool {
	depth := 0
	var quote rune
	for _, c := range expr {
		switch {
		case quote != 0:
			if c == quote {
				quote = 0
			}
		case c == '\'' || c == '"':
			quote = c
		case c == '(':
			depth++
		case c == ')':
			depth--
			if depth < 0 {
				return false
			}
		}
	}
	return depth == 0 && quote == 0
}

// dryStage builds the job's target and staged table from an empty input in
// the scratch connection and returns staged's columns.
func dryStage(ctx context.Context, conn *sql.Conn, job *Job) ([]string, error) {
	empty := make([]string, len(job.Pipeline.Columns))
	for i, c := range job.Pipeline.Columns {
		empty[i] = "CAST(NULL AS VARCHAR) AS " + quoteIdent(c.Name)
	}
	vars := map[string]any{"idem_job": job.Name, "idem_batch_id": "dry", "idem_snapshot": int64(1)}
	for k, v := range job.Params {
		vars[k] = v
	}
	for _, k := range sortedKeys(vars) {
		if _, err := conn.ExecContext(ctx, "SET VARIABLE "+quoteIdent(k)+" = ?", vars[k]); err != nil {
			return nil, err
		}
	}
	stmts := []string{
		"CREATE TEMP VIEW input AS SELECT " + strings.Join(empty, ", ") + " WHERE false",
		"CREATE TEMP TABLE idem_erased (key VARCHAR, position BIGINT)",
		job.Expand(job.DDL),
		job.Expand(job.Steps[0].SQL),
	}
	for _, s := range stmts {
		if _, err := conn.ExecContext(ctx, s); err != nil {
			return nil, errors.New(firstLine(err))
		}
	}
	rows, err := conn.QueryContext(ctx, `SELECT column_name FROM duckdb_columns() WHERE database_name = 'temp' AND table_name = 'staged' ORDER BY column_index`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var cols []string
	hasReason := false
	for rows.Next() {
		var c string
		if err := rows.Scan(&c); err != nil {
			return nil, err
		}
		cols = append(cols, c)
		hasReason = hasReason || c == "reason"
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if len(cols) == 0 {
		return nil, errors.New("the step left no table staged")
	}
	if !hasReason {
		return nil, errors.New("staged has no column reason")
	}
	return cols, nil
}

func firstLine(err error) string {
	msg := err.Error()
	if i := strings.Index(msg, "\n"); i >= 0 {
		msg = msg[:i]
	}
	return strings.TrimSpace(msg)
}

// walkJSON calls f on every object in a decoded JSON tree.
func walkJSON(v any, f func(map[string]any)) {
	switch x := v.(type) {
	case map[string]any:
		f(x)
		for _, k := range sortedKeys(x) {
			walkJSON(x[k], f)
		}
	case []any:
		for _, e := range x {
			walkJSON(e, f)
		}
	}
}

// nondeterministic names functions whose result is not a function of their
// arguments: the same input would give other rows.
var nondeterministic = map[string]bool{
	"now": true, "current_timestamp": true, "get_current_timestamp": true, "transaction_timestamp": true,
	"statement_timestamp": true, "current_date": true, "current_time": true, "today": true,
	"get_current_time": true, "localtime": true, "localtimestamp": true, "random": true, "setseed": true,
	"uuid": true, "gen_random_uuid": true, "uuidv4": true, "uuidv7": true, "current_query": true,
	"txid_current": true, "nextval": true, "currval": true,
}

// nondeterministicRefs are the special names DuckDB parses as column
// references (current_timestamp without parentheses).
var nondeterministicRefs = map[string]bool{
	"current_timestamp": true, "current_date": true, "current_time": true,
	"localtime": true, "localtimestamp": true,
}
