package run

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/idem-dev/idem/internal/catalog"
	"github.com/idem-dev/idem/internal/job"
	"github.com/idem-dev/idem/internal/report"
	"github.com/idem-dev/idem/internal/seal"
	"github.com/idem-dev/idem/internal/sqltext"
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
// must parse as a single expression (json_serialize_sql) built only of
// what checkRuleNode allows (staged columns, constants, operators, CASE,
// casts and the deterministic scalar functions of ruleFunctions), bind as a
// BOOLEAN against the staged table that the stage step builds from an empty
// input in a scratch in-memory database, and evaluate on a staged row of
// NULLs. So a rule's outcome is a function of the row alone: the same under
// any --threads, and it cannot fail a run for a reason outside the row.

// RulePrefix starts the outcome of a row quarantined by a quality rule.
const RulePrefix = "invalid_rule:"

// applyRules tags the staged rows that fail a rule. It is a no-op for a job
// without rules.
func applyRules(ctx context.Context, tx *sql.Tx, j *job.Job) error {
	if len(j.Rules) == 0 {
		return nil
	}
	var cases, fails []string
	args := make([]any, 0, len(j.Rules))
	for _, r := range j.Rules {
		// The rule text is SQL by nature; it was parsed and bound when the
		// job was loaded and cannot hold a second statement or a subquery.
		cond := "(" + r.SQL + ") IS NOT TRUE"
		cases = append(cases, "WHEN "+cond+" THEN ?")
		fails = append(fails, cond)
		args = append(args, RulePrefix+r.Name)
	}
	q := "UPDATE staged SET reason = CASE " + strings.Join(cases, " ") + " END WHERE reason IS NULL AND (" + strings.Join(fails, " OR ") + ")"
	if _, err := tx.ExecContext(ctx, q, args...); err != nil {
		return fmt.Errorf("apply quality rules of job %s: %w", j.Name, contractError(j, "the job's quality rules", catalog.TrimSQLError(err)))
	}
	return nil
}

// validateRules checks every rule of job and returns the index of the first
// bad one with the reason.
func validateRules(ctx context.Context, j *job.Job) (int, error) {
	db, err := OpenMemory(ctx, "?autoinstall_known_extensions=false&threads=1")
	if err != nil {
		return 0, fmt.Errorf("open scratch database to check quality rules: %w", err)
	}
	defer db.Close()
	conn, err := db.Conn(ctx)
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	refs := make([][]string, len(j.Rules))
	for i, r := range j.Rules {
		cols, err := checkRuleShape(ctx, conn, r)
		if err != nil {
			return i, fmt.Errorf("rule %s: %w", r.Name, err)
		}
		refs[i] = cols
	}
	cols, err := DryStage(ctx, conn, j)
	if err != nil {
		return 0, fmt.Errorf("quality rules need the stage step (%s) to build temp table staged with a reason column: %w", j.Steps[0].Name, err)
	}
	for i, r := range j.Rules {
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
		for _, c := range refs[i] {
			if !slices.ContainsFunc(cols, func(s string) bool { return strings.EqualFold(s, c) }) {
				return i, fmt.Errorf("rule %s: %s is not a staged column (staged columns: %s)", r.Name, c, strings.Join(cols, ", "))
			}
		}
	}
	// Prove each rule on a row: the staged row whose columns are all NULL.
	// Constants are converted when the rule first meets a row, so a rule
	// like fare + 'x' fails here, at load, rather than in a run.
	for _, q := range []string{"CREATE TEMP TABLE idem_rule_row AS SELECT * FROM staged LIMIT 0", "INSERT INTO idem_rule_row DEFAULT VALUES"} {
		if _, err := conn.ExecContext(ctx, q); err != nil {
			return 0, fmt.Errorf("quality rules: make a row to check them on: %s", firstLine(err))
		}
	}
	for i, r := range j.Rules {
		var ok sql.NullBool
		if err := conn.QueryRowContext(ctx, "SELECT ("+r.SQL+") AS idem_rule FROM idem_rule_row AS staged").Scan(&ok); err != nil {
			return i, fmt.Errorf("rule %s: %s (on a staged row whose columns are NULL)", r.Name, firstLine(err))
		}
	}
	return 0, nil
}

// checkRuleShape parses the rule inside a fixed SELECT and requires that the
// parse is exactly that SELECT with one expression: text that closes the
// parenthesis to add clauses or statements is refused.
func checkRuleShape(ctx context.Context, conn *sql.Conn, r job.Rule) ([]string, error) {
	if strings.Contains(r.SQL, ";") {
		return nil, errors.New("a rule is one SQL expression; ';' is not allowed")
	}
	if !balanced(r.SQL) {
		return nil, errors.New("not a single SQL expression: unbalanced parentheses")
	}
	var text string
	if err := conn.QueryRowContext(ctx, "SELECT CAST(json_serialize_sql(?::VARCHAR) AS VARCHAR)", "SELECT ("+r.SQL+") AS idem_rule FROM staged").Scan(&text); err != nil {
		return nil, fmt.Errorf("parse: %w", err)
	}
	var parsed struct {
		Error      bool   `json:"error"`
		Message    string `json:"error_message"`
		Statements []struct {
			Node map[string]any `json:"node"`
		} `json:"statements"`
	}
	if err := json.Unmarshal([]byte(text), &parsed); err != nil {
		return nil, fmt.Errorf("parse: %w", err)
	}
	if parsed.Error {
		return nil, fmt.Errorf("not a SQL expression: %s", parsed.Message)
	}
	if len(parsed.Statements) != 1 {
		return nil, errors.New("not a single SQL expression")
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
		return nil, errors.New("not a single SQL expression over the staged columns")
	}
	if err := checkRuleNode(list[0]); err != nil {
		return nil, err
	}
	var cols []string
	sqltext.WalkJSON(list[0], func(m map[string]any) {
		if names, _ := m["column_names"].([]any); m["class"] == "COLUMN_REF" && len(names) > 0 {
			s, _ := names[len(names)-1].(string)
			cols = append(cols, s)
		}
	})
	return cols, nil
}

// checkRuleNode accepts only what a deterministic expression of one row is
// made of: column references, constants, operators, comparisons, CASE,
// casts and calls of the scalar functions in ruleFunctions. Everything
// else (settings, the environment, files, tables, the clock, randomness,
// subqueries, star expressions, aggregates, windows, lambdas, error()) is
// refused, so that a rule cannot give another outcome under other settings
// nor fail the run for a reason that is not in the row.
func checkRuleNode(v any) error {
	switch x := v.(type) {
	case []any:
		for _, e := range x {
			if err := checkRuleNode(e); err != nil {
				return err
			}
		}
		return nil
	case map[string]any:
	default:
		return nil
	}
	m := v.(map[string]any)
	class, _ := m["class"].(string)
	typ, _ := m["type"].(string)
	switch class {
	case "":
		// Not an expression: a value, a type or an ORDER_MODIFIER holder.
	case "COLUMN_REF":
		names, _ := m["column_names"].([]any)
		if len(names) == 2 {
			if t, _ := names[0].(string); !strings.EqualFold(t, "staged") {
				return fmt.Errorf("a rule may not read %s: it reads only the staged row's columns", joinNames(names))
			}
		} else if len(names) != 1 {
			return fmt.Errorf("a rule may not read %s: it reads only the staged row's columns", joinNames(names))
		}
		if s, _ := names[len(names)-1].(string); seal.NondeterministicRefs[strings.ToLower(s)] {
			return fmt.Errorf("a rule may not read %s: the same row must always pass or fail", s)
		}
	case "CONSTANT", "CONJUNCTION", "COMPARISON", "BETWEEN", "CASE":
	case "OPERATOR":
		if !ruleOperators[typ] {
			return fmt.Errorf("a rule may not use operator %s", strings.ToLower(strings.TrimPrefix(typ, "OPERATOR_")))
		}
	case "TYPE":
		// DuckDB 2.0: the type a CAST converts to, checked at the CAST.
		return nil
	case "CAST":
		id, zoned := sqltext.CastType(m)
		if zoned {
			return fmt.Errorf("a rule may not cast to %s: the result depends on the TimeZone setting", id)
		}
		if try, _ := m["try_cast"].(bool); !try && id != "VARCHAR" && readsColumn(m["child"]) {
			return fmt.Errorf("a rule may not CAST a column to %s: a value that does not convert would fail the whole run; use TRY_CAST (NULL fails the rule)", id)
		}
	case "FUNCTION":
		name, _ := m["function_name"].(string)
		schema, _ := m["schema"].(string)
		catalog, _ := m["catalog"].(string)
		if !ruleFunctions[strings.ToLower(name)] || (schema != "" && schema != "main") || catalog != "" {
			return fmt.Errorf("a rule may not call %s(): %s", name, refusedWhy(strings.ToLower(name)))
		}
		ob, _ := m["order_bys"].(map[string]any)
		orders, _ := ob["orders"].([]any)
		if distinct, _ := m["distinct"].(bool); distinct || m["filter"] != nil || len(orders) > 0 {
			return fmt.Errorf("a rule may not call %s() with DISTINCT, FILTER or ORDER BY: it checks one row's columns", name)
		}
	case "STAR":
		return errors.New("a rule may not hold * or COLUMNS(...): it names the columns it checks")
	case "SUBQUERY":
		return errors.New("a rule may not hold a subquery: it checks one row's columns")
	case "WINDOW":
		return errors.New("a rule may not hold a window function: it checks one row's columns")
	case "LAMBDA":
		return errors.New("a rule may not hold a lambda: it checks one row's columns")
	case "PARAMETER", "POSITIONAL_REFERENCE", "DEFAULT":
		return fmt.Errorf("a rule may not hold a %s: it names the columns it checks", strings.ToLower(strings.ReplaceAll(class, "_", " ")))
	default:
		return fmt.Errorf("a rule may not hold a %s expression", strings.ToLower(class))
	}
	for _, k := range report.SortedKeys(m) {
		if err := checkRuleNode(m[k]); err != nil {
			return err
		}
	}
	return nil
}

// readsColumn reports whether an expression tree holds a column reference.
func readsColumn(v any) bool {
	found := false
	sqltext.WalkJSON(v, func(m map[string]any) { found = found || m["class"] == "COLUMN_REF" })
	return found
}

func joinNames(names []any) string {
	parts := make([]string, len(names))
	for i, n := range names {
		parts[i], _ = n.(string)
	}
	return strings.Join(parts, ".")
}

// refusedWhy says why a function is not one a rule may call.
func refusedWhy(name string) string {
	switch {
	case seal.Nondeterministic[name]:
		return "the same row must always pass or fail"
	case name == "current_setting" || name == "getenv" || name == "getvariable" || strings.HasPrefix(name, "current_") || name == "version":
		return "it reads a setting, a variable or the environment, not the row"
	case name == "error":
		return "it would fail the run; a rule fails rows"
	case strings.HasPrefix(name, "read_") || name == "glob" || strings.Contains(name, "scan"):
		return "it reads files or tables, not the row"
	}
	return "not on idem's list of deterministic scalar functions a rule may call (string, math, regexp, date arithmetic)"
}

// ruleOperators are the OPERATOR expression types a rule may hold.
var ruleOperators = map[string]bool{
	"OPERATOR_NOT": true, "OPERATOR_IS_NULL": true, "OPERATOR_IS_NOT_NULL": true,
	"COMPARE_IN": true, "COMPARE_NOT_IN": true, "OPERATOR_COALESCE": true, "OPERATOR_NULLIF": true,
	"ARRAY_EXTRACT": true, "ARRAY_SLICE": true, "STRUCT_EXTRACT": true,
}

// ruleFunctions are the scalar functions a rule may call: each gives the
// same value for the same arguments, reads nothing but them, and does not
// depend on settings (TimeZone, threads) or the clock. Operators such as +
// and LIKE parse as functions too.
var ruleFunctions = setOf(
	// operators
	"+", "-", "*", "/", "//", "%", "**", "^", "||", "&", "|", "<<", ">>", "~", "@", "xor",
	"~~", "!~~", "~~*", "!~~*", "~~~", "!~~~", "->", "->>",
	// logic and NULLs
	"nullif", "ifnull", "if", "greatest", "least", "isnan", "isinf", "isfinite",
	// strings
	"length", "len", "strlen", "char_length", "character_length", "octet_length", "bit_length",
	"lower", "lcase", "upper", "ucase", "trim", "ltrim", "rtrim", "substring", "substr", "left", "right",
	"concat", "concat_ws", "contains", "starts_with", "prefix", "suffix", "ends_with", "replace", "reverse",
	"repeat", "lpad", "rpad", "position", "strpos", "instr", "split_part", "string_split", "str_split",
	"ascii", "chr", "unicode", "md5", "sha1", "sha256", "levenshtein", "damerau_levenshtein",
	"jaro_similarity", "jaro_winkler_similarity", "hamming", "mismatches", "format", "printf",
	"strip_accents", "nfc_normalize", "translate", "like_escape", "not_like_escape", "ilike_escape",
	"not_ilike_escape", "regexp_matches", "regexp_full_match", "regexp_extract", "regexp_replace",
	// lists, structs and JSON values
	"list_value", "list_contains", "list_has", "array_contains", "array_has", "list_extract", "list_element",
	"array_extract", "array_length", "len", "cardinality", "list_position", "list_indexof", "struct_pack", "row",
	"struct_extract", "json_extract", "json_extract_string", "json_valid", "json_type", "json_array_length",
	"json_exists",
	// math
	"abs", "ceil", "ceiling", "floor", "round", "trunc", "sign", "sqrt", "cbrt", "pow", "power", "exp",
	"ln", "log", "log10", "log2", "mod", "gcd", "lcm", "even",
	// dates and times, without the clock or the time zone
	"date_part", "datepart", "year", "month", "day", "dayofmonth", "dayofweek", "dayofyear", "isodow",
	"week", "weekofyear", "quarter", "hour", "minute", "second", "yearweek", "date_trunc", "datetrunc",
	"date_diff", "datediff", "date_sub", "datesub", "make_date", "make_time", "make_timestamp",
	"to_days", "to_hours", "to_minutes", "to_seconds", "to_months", "to_years", "to_weeks",
	"to_milliseconds", "to_microseconds", "epoch", "epoch_ms", "last_day", "dayname", "monthname",
	"strftime", "strptime", "try_strptime",
)

func setOf(names ...string) map[string]bool {
	m := make(map[string]bool, len(names))
	for _, n := range names {
		m[n] = true
	}
	return m
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

// DryStage builds the job's target and staged table from an empty input in
// the scratch connection and returns staged's columns.
func DryStage(ctx context.Context, conn *sql.Conn, j *job.Job) ([]string, error) {
	empty := make([]string, len(j.Pipeline.Columns))
	for i, c := range j.Pipeline.Columns {
		empty[i] = "CAST(NULL AS VARCHAR) AS " + sqltext.QuoteIdent(c.Name)
	}
	vars := map[string]any{"idem_job": j.Name, "idem_batch_id": "dry", "idem_snapshot": int64(1)}
	for k, v := range j.Params {
		vars[k] = v
	}
	for _, k := range report.SortedKeys(vars) {
		if _, err := conn.ExecContext(ctx, "SET VARIABLE "+sqltext.QuoteIdent(k)+" = ?", vars[k]); err != nil {
			return nil, err
		}
	}
	stmts := []string{
		"CREATE TEMP VIEW input AS SELECT " + strings.Join(empty, ", ") + " WHERE false",
		"CREATE TEMP TABLE idem_erased (key VARCHAR, position BIGINT)",
		j.Expand(j.DDL),
		j.Expand(j.Steps[0].SQL),
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
		return nil, errNoStaged
	}
	if !hasReason {
		return nil, ErrNoReason
	}
	return cols, nil
}

// The stage step's failures to keep the contract, as dryStage finds them.
var (
	errNoStaged = errors.New("the step left no table staged")
	ErrNoReason = errors.New("staged has no column reason")
)

func firstLine(err error) string {
	msg := err.Error()
	if i := strings.Index(msg, "\n"); i >= 0 {
		msg = msg[:i]
	}
	return strings.TrimSpace(msg)
}
