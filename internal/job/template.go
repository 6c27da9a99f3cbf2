package job

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// Template placeholders in pipeline SQL. Every identifier they produce is
// quoted, every type comes from the whitelist in columnTypes, and nothing a
// job file says is pasted as raw text. The job-shaped placeholders are
// available only in generic pipelines (pipeline.toml generic = true), whose
// columns, key and ordering column come from the job:
//
//	{{table}}, {{table:_suffix}}  the target, a companion object
//	{{upstream:JOB}}              an upstream job's rows pinned for the run (upstream.go)
//	{{columns}}, {{columns:p}}    every input column: "a", "b" / p."a", p."b"
//	{{key}}, {{key:p}}            the key columns
//	{{nonkey}}, {{nonkey:p}}      the other columns (ordering column and payload)
//	{{order}}, {{order:p}}        the ordering column, or CAST(NULL AS BIGINT) without one
//	{{order_is_null}}             "o" IS NULL, or FALSE without an ordering column
//	{{key_is_null}}               ("k1" IS NULL OR "k2" IS NULL)
//	{{key_match:a:b}}             a."k1" = b."k1" AND a."k2" = b."k2"
//	{{payload_same:a:b}}          payload columns pairwise IS NOT DISTINCT FROM
//	{{typed_columns}}             TRY_CAST("a" AS BIGINT) AS "a", ...
//	{{type_error}}                name of the first column whose value does not cast, or NULL
//	{{raw_struct}}                struct_pack("a" := CAST("a" AS VARCHAR), ...)
//	{{raw_fields:p}}              struct_extract(p, 'a'), ... (p a struct column)
//	{{agg_nonkey}}                per group: any_value of the ordering column, payload only when count(*) = 1
//	{{null_payload}}              "x" = NULL, ... (an UPDATE SET list)
//	{{set_nonkey:p}}              "x" = p."x", ... (an UPDATE SET list)
//	{{column_defs}}               "a" BIGINT, ... (the declared types)
//	{{text_column_defs}}          "a" VARCHAR, ... (the outcomes table keeps values as received)
//	{{add_text_columns:_suffix}}  ALTER TABLE ... ADD COLUMN IF NOT EXISTS "a" VARCHAR; ... (a column added later)
//	{{input_op}}                  what an input row does: column idem_op of an upstream's changes ('upsert' or
//	                              'delete', see source.Upstream), 'upsert' for a file input
var placeholder = regexp.MustCompile(`\{\{\s*([a-z_]+)((?::[^:}\s]*)*)\s*\}\}`)

var aliasRef = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)?$`)

var suffixRef = regexp.MustCompile(`^[A-Za-z0-9_]+$`)

// Expand expands the placeholders of a step or schema file for this job.
// The job's files were expanded once when it was loaded, so an unknown
// placeholder was already reported there.
func (j *Job) Expand(text string) string {
	out, _ := expandTemplate(text, j.Table, j.shape(), j.Input.Upstream)
	return out
}

// shape is the job-declared shape of a generic pipeline, or nil.
func (j *Job) shape() *tableShape {
	if j.Pipeline.Model {
		// A model's columns are its SELECT's: only the key is known.
		return &tableShape{key: j.Key}
	}
	if !j.Pipeline.Generic {
		return nil
	}
	return &tableShape{columns: j.Columns, key: j.Key, order: j.OrderBy}
}

type tableShape struct {
	columns []Column
	key     []string
	order   string
}

func (s *tableShape) isKey(name string) bool {
	for _, k := range s.key {
		if k == name {
			return true
		}
	}
	return false
}

func (s *tableShape) typeOf(name string) string {
	for _, c := range s.columns {
		if c.Name == name {
			return c.Type
		}
	}
	return ""
}

// nonKey lists the columns that are not key columns, in declared order.
func (s *tableShape) nonKey() []string {
	var out []string
	for _, c := range s.columns {
		if !s.isKey(c.Name) {
			out = append(out, c.Name)
		}
	}
	return out
}

// payload lists the columns that are neither key nor ordering column.
func (s *tableShape) payload() []string {
	var out []string
	for _, c := range s.nonKey() {
		if c != s.order {
			out = append(out, c)
		}
	}
	return out
}

func (s *tableShape) names() []string {
	out := make([]string, len(s.columns))
	for i, c := range s.columns {
		out[i] = c.Name
	}
	return out
}

// expandTemplate expands every placeholder in text. It reports the first
// unknown or malformed placeholder, or a job-shaped one used in a pipeline
// that is not generic (shape nil).
func expandTemplate(text, table string, shape *tableShape, upstream []string) (string, error) {
	var firstErr error
	out := placeholder.ReplaceAllStringFunc(text, func(m string) string {
		sub := placeholder.FindStringSubmatch(m)
		name := sub[1]
		var args []string
		if sub[2] != "" {
			args = strings.Split(sub[2][1:], ":")
		}
		s, err := expandOne(name, args, table, shape, upstream)
		if err != nil {
			if firstErr == nil {
				firstErr = fmt.Errorf("placeholder %s: %w", m, err)
			}
			return m
		}
		return s
	})
	return out, firstErr
}

func expandOne(name string, args []string, table string, shape *tableShape, upstream []string) (string, error) {
	if name == "upstream" {
		if len(args) != 1 || !Identifier.MatchString(args[0]) {
			return "", fmt.Errorf("want {{upstream:JOB}}")
		}
		if !slices.Contains(upstream, args[0]) {
			return "", fmt.Errorf("job %s is not a declared upstream: add it to [input] upstream", args[0])
		}
		return "temp." + QuoteIdent(UpstreamRelation(args[0])), nil
	}
	if name == "table" {
		switch {
		case len(args) == 0:
			return QuoteIdent(table), nil
		case len(args) == 1 && suffixRef.MatchString(args[0]):
			return QuoteIdent(table + args[0]), nil
		}
		return "", fmt.Errorf("want {{table}} or {{table:_suffix}}")
	}
	if shape == nil {
		return "", fmt.Errorf("only generic pipelines (generic = true) take their columns from the job")
	}
	want := func(n int) error {
		if len(args) != n {
			return fmt.Errorf("takes %d argument(s), got %d", n, len(args))
		}
		for _, a := range args {
			if !aliasRef.MatchString(a) {
				return fmt.Errorf("argument %q is not a table alias", a)
			}
		}
		return nil
	}
	optional := func() (string, error) {
		if len(args) == 0 {
			return "", nil
		}
		if err := want(1); err != nil {
			return "", err
		}
		return quoteRef(args[0]) + ".", nil
	}
	list := func(names []string, f func(string) string) string {
		parts := make([]string, len(names))
		for i, n := range names {
			parts[i] = f(n)
		}
		return strings.Join(parts, ", ")
	}
	join := func(names []string, sep string, f func(string) string) string {
		parts := make([]string, len(names))
		for i, n := range names {
			parts[i] = f(n)
		}
		return strings.Join(parts, sep)
	}
	q := QuoteIdent
	switch name {
	case "columns", "key", "nonkey":
		p, err := optional()
		if err != nil {
			return "", err
		}
		names := shape.names()
		if name == "key" {
			names = shape.key
		} else if name == "nonkey" {
			names = shape.nonKey()
		}
		return list(names, func(n string) string { return p + q(n) }), nil
	case "order":
		p, err := optional()
		if err != nil {
			return "", err
		}
		if shape.order == "" {
			return "CAST(NULL AS BIGINT)", nil
		}
		return p + q(shape.order), nil
	case "order_is_null":
		if err := want(0); err != nil {
			return "", err
		}
		if shape.order == "" {
			return "FALSE", nil
		}
		return q(shape.order) + " IS NULL", nil
	case "key_is_null":
		if err := want(0); err != nil {
			return "", err
		}
		return "(" + join(shape.key, " OR ", func(n string) string { return q(n) + " IS NULL" }) + ")", nil
	case "key_match", "payload_same":
		if err := want(2); err != nil {
			return "", err
		}
		a, b := quoteRef(args[0]), quoteRef(args[1])
		if name == "key_match" {
			return join(shape.key, " AND ", func(n string) string { return a + "." + q(n) + " = " + b + "." + q(n) }), nil
		}
		if len(shape.payload()) == 0 {
			return "TRUE", nil
		}
		return "(" + join(shape.payload(), " AND ", func(n string) string {
			return a + "." + q(n) + " IS NOT DISTINCT FROM " + b + "." + q(n)
		}) + ")", nil
	case "typed_columns":
		if err := want(0); err != nil {
			return "", err
		}
		return list(shape.names(), func(n string) string {
			return "TRY_CAST(" + q(n) + " AS " + shape.typeOf(n) + ") AS " + q(n)
		}), nil
	case "type_error":
		if err := want(0); err != nil {
			return "", err
		}
		return "CASE " + join(shape.names(), " ", func(n string) string {
			return "WHEN " + q(n) + " IS NOT NULL AND TRY_CAST(" + q(n) + " AS " + shape.typeOf(n) + ") IS NULL THEN " + SQLString(n)
		}) + " END", nil
	case "raw_struct":
		if err := want(0); err != nil {
			return "", err
		}
		return "struct_pack(" + list(shape.names(), func(n string) string {
			return q(n) + " := CAST(" + q(n) + " AS VARCHAR)"
		}) + ")", nil
	case "raw_fields":
		if err := want(1); err != nil {
			return "", err
		}
		ref := quoteRef(args[0])
		return list(shape.names(), func(n string) string {
			return "struct_extract(" + ref + ", " + SQLString(n) + ")"
		}), nil
	case "agg_nonkey":
		if err := want(0); err != nil {
			return "", err
		}
		return list(shape.nonKey(), func(n string) string {
			if n == shape.order {
				return "any_value(" + q(n) + ") AS " + q(n)
			}
			return "CASE WHEN count(*) = 1 THEN any_value(" + q(n) + ") END AS " + q(n)
		}), nil
	case "null_payload":
		if err := want(0); err != nil {
			return "", err
		}
		return list(shape.payload(), func(n string) string { return q(n) + " = NULL" }), nil
	case "set_nonkey":
		if err := want(1); err != nil {
			return "", err
		}
		p := quoteRef(args[0])
		return list(shape.nonKey(), func(n string) string { return q(n) + " = " + p + "." + q(n) }), nil
	case "input_op":
		if err := want(0); err != nil {
			return "", err
		}
		if len(upstream) > 0 {
			return q("idem_op"), nil
		}
		return "'upsert'", nil
	case "add_text_columns":
		if len(args) != 1 || !suffixRef.MatchString(args[0]) {
			return "", fmt.Errorf("want {{add_text_columns:_suffix}}")
		}
		t := QuoteIdent(table + args[0])
		return join(shape.names(), "; ", func(n string) string {
			return "ALTER TABLE " + t + " ADD COLUMN IF NOT EXISTS " + q(n) + " VARCHAR"
		}), nil
	case "column_defs", "text_column_defs":
		if err := want(0); err != nil {
			return "", err
		}
		return list(shape.names(), func(n string) string {
			if name == "text_column_defs" {
				return q(n) + " VARCHAR"
			}
			return q(n) + " " + shape.typeOf(n)
		}), nil
	}
	return "", fmt.Errorf("unknown placeholder %q", name)
}

// quoteRef quotes an alias or alias.column reference part by part.
func quoteRef(ref string) string {
	parts := strings.Split(ref, ".")
	for i, p := range parts {
		parts[i] = QuoteIdent(p)
	}
	return strings.Join(parts, ".")
}

var decimalType = regexp.MustCompile(`^DECIMAL\(\s*([0-9]{1,2})\s*,\s*([0-9]{1,2})\s*\)$`)

// columnTypes is the whitelist of DuckDB type names a job may declare for
// its input columns, with accepted aliases mapped to the canonical name.
// TIMESTAMPTZ is left out on purpose: casting text to it depends on the
// session's time zone, so the same bytes could give other rows.
var columnTypes = map[string]string{
	"BOOLEAN": "BOOLEAN", "BOOL": "BOOLEAN",
	"TINYINT": "TINYINT", "SMALLINT": "SMALLINT",
	"INTEGER": "INTEGER", "INT": "INTEGER", "INT4": "INTEGER",
	"BIGINT": "BIGINT", "INT8": "BIGINT", "LONG": "BIGINT",
	"HUGEINT":  "HUGEINT",
	"UTINYINT": "UTINYINT", "USMALLINT": "USMALLINT", "UINTEGER": "UINTEGER", "UBIGINT": "UBIGINT",
	"FLOAT": "FLOAT", "REAL": "FLOAT", "DOUBLE": "DOUBLE", "FLOAT8": "DOUBLE",
	"DECIMAL": "DECIMAL(18,3)",
	"VARCHAR": "VARCHAR", "TEXT": "VARCHAR", "STRING": "VARCHAR",
	"DATE": "DATE", "TIME": "TIME", "TIMESTAMP": "TIMESTAMP", "DATETIME": "TIMESTAMP",
	"INTERVAL": "INTERVAL", "UUID": "UUID", "BLOB": "BLOB",
}

// integerTypes are the canonical types a watermark column may have.
var integerTypes = map[string]bool{
	"TINYINT": true, "SMALLINT": true, "INTEGER": true, "BIGINT": true,
	"UTINYINT": true, "USMALLINT": true, "UINTEGER": true,
}

// canonicalType checks a declared column type against the whitelist and
// returns its canonical spelling.
func canonicalType(t string) (string, error) {
	u := strings.ToUpper(strings.TrimSpace(t))
	if c, ok := columnTypes[u]; ok {
		return c, nil
	}
	if m := decimalType.FindStringSubmatch(u); m != nil {
		var p, s int
		fmt.Sscanf(m[1], "%d", &p)
		fmt.Sscanf(m[2], "%d", &s)
		if p >= 1 && p <= 38 && s <= p {
			return fmt.Sprintf("DECIMAL(%d,%d)", p, s), nil
		}
	}
	names := make([]string, 0, len(columnTypes))
	for k, v := range columnTypes {
		if k == v {
			names = append(names, k)
		}
	}
	return "", fmt.Errorf("type %q is not one idem accepts (one of %s, or DECIMAL(p,s))", t, strings.Join(sortedStrings(names), ", "))
}

func sortedStrings(s []string) []string {
	m := map[string]bool{}
	for _, x := range s {
		m[x] = true
	}
	return SortedKeys(m)
}

// Companion matches a {{table:_suffix}} placeholder: a companion object
// of the target, named by its suffix.
var Companion = regexp.MustCompile(`\{\{\s*table:([A-Za-z0-9_]+)\s*\}\}`)
