package pipeline

import (
	"errors"
	"fmt"
	"github.com/idem-dev/idem/internal/seal"
	"github.com/idem-dev/idem/internal/sqltext"
	"slices"
	"strings"
)

// A templateFunc is one placeholder of the template language.
type templateFunc struct {
	// generic placeholders expand the job's shape: they are refused in a
	// pipeline that is neither generic nor a model.
	generic bool
	expand  func(x *expansion, args []string) (string, error)
}

// templateFuncs is the template language of pipeline SQL: each
// placeholder's name and the function that expands it. Every identifier a
// placeholder produces is quoted, every type comes from the whitelist in
// columnTypes, and nothing a job file says is pasted as raw text. The
// job-shaped placeholders are available only in generic pipelines
// (pipeline.toml generic = true), whose columns, key and ordering column
// come from the job, and in models, which know only their key:
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
//	{{payload_same:a:b}}          payload columns pairwise IS NOT DISTINCT FROM, or TRUE without payload
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
//
// {{model}} is not one of them: a model pipeline's steps take the model's
// SELECT there before any expansion (ModelPlaceholder, model.go).
//
// The table is built per call, so that no package-level table can be
// changed.
func templateFuncs() map[string]templateFunc {
	shaped := func(f func(x *expansion, args []string) (string, error)) templateFunc {
		return templateFunc{generic: true, expand: f}
	}
	return map[string]templateFunc{
		"table":            {expand: expandTable},
		"upstream":         {expand: expandUpstream},
		"columns":          shaped(columnList((*Shape).names)),
		"key":              shaped(columnList(func(s *Shape) []string { return s.Key })),
		"nonkey":           shaped(columnList((*Shape).nonKey)),
		"order":            shaped(expandOrder),
		"order_is_null":    shaped(expandOrderIsNull),
		"key_is_null":      shaped(expandKeyIsNull),
		"key_match":        shaped(expandKeyMatch),
		"payload_same":     shaped(expandPayloadSame),
		"typed_columns":    shaped(expandTypedColumns),
		"type_error":       shaped(expandTypeError),
		"raw_struct":       shaped(expandRawStruct),
		"raw_fields":       shaped(expandRawFields),
		"agg_nonkey":       shaped(expandAggNonKey),
		"null_payload":     shaped(expandNullPayload),
		"set_nonkey":       shaped(expandSetNonKey),
		"column_defs":      shaped(columnDefs(false)),
		"text_column_defs": shaped(columnDefs(true)),
		"add_text_columns": shaped(expandAddTextColumns),
		"input_op":         shaped(expandInputOp),
	}
}

// wantAliases checks that args are n table aliases (alias or
// alias.column).
func wantAliases(args []string, n int) error {
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

// optionalAlias is "" without arguments, or the quoted alias of the one
// argument followed by a dot.
func optionalAlias(args []string) (string, error) {
	if len(args) == 0 {
		return "", nil
	}
	if err := wantAliases(args, 1); err != nil {
		return "", err
	}
	return quoteRef(args[0]) + ".", nil
}

// joinEach joins f of each name with sep.
func joinEach(names []string, sep string, f func(string) string) string {
	parts := make([]string, len(names))
	for i, n := range names {
		parts[i] = f(n)
	}
	return strings.Join(parts, sep)
}

func expandTable(x *expansion, args []string) (string, error) {
	switch {
	case len(args) == 0:
		return sqltext.QuoteIdent(x.table), nil
	case len(args) == 1 && SuffixRef.MatchString(args[0]):
		return sqltext.QuoteIdent(x.table + args[0]), nil
	}
	return "", errors.New("want {{table}} or {{table:_suffix}}")
}

func expandUpstream(x *expansion, args []string) (string, error) {
	if len(args) != 1 || !sqltext.Identifier.MatchString(args[0]) {
		return "", errors.New("want {{upstream:JOB}}")
	}
	if !slices.Contains(x.upstream, args[0]) {
		return "", fmt.Errorf("job %s is not a declared upstream: add it to [input] upstream", args[0])
	}
	return "temp." + sqltext.QuoteIdent(seal.UpstreamRelation(args[0])), nil
}

// columnList expands to the columns names picks, quoted, each after the
// optional alias.
func columnList(names func(*Shape) []string) func(x *expansion, args []string) (string, error) {
	return func(x *expansion, args []string) (string, error) {
		p, err := optionalAlias(args)
		if err != nil {
			return "", err
		}
		return joinEach(names(x.shape), ", ", func(n string) string { return p + sqltext.QuoteIdent(n) }), nil
	}
}

func expandOrder(x *expansion, args []string) (string, error) {
	p, err := optionalAlias(args)
	if err != nil {
		return "", err
	}
	if x.shape.Order == "" {
		return "CAST(NULL AS BIGINT)", nil
	}
	return p + sqltext.QuoteIdent(x.shape.Order), nil
}

func expandOrderIsNull(x *expansion, args []string) (string, error) {
	if err := wantAliases(args, 0); err != nil {
		return "", err
	}
	if x.shape.Order == "" {
		return "FALSE", nil
	}
	return sqltext.QuoteIdent(x.shape.Order) + " IS NULL", nil
}

func expandKeyIsNull(x *expansion, args []string) (string, error) {
	if err := wantAliases(args, 0); err != nil {
		return "", err
	}
	return "(" + joinEach(x.shape.Key, " OR ", func(n string) string { return sqltext.QuoteIdent(n) + " IS NULL" }) + ")", nil
}

func expandKeyMatch(x *expansion, args []string) (string, error) {
	if err := wantAliases(args, 2); err != nil {
		return "", err
	}
	a, b := quoteRef(args[0]), quoteRef(args[1])
	return joinEach(x.shape.Key, " AND ", func(n string) string {
		return a + "." + sqltext.QuoteIdent(n) + " = " + b + "." + sqltext.QuoteIdent(n)
	}), nil
}

func expandPayloadSame(x *expansion, args []string) (string, error) {
	if err := wantAliases(args, 2); err != nil {
		return "", err
	}
	a, b := quoteRef(args[0]), quoteRef(args[1])
	payload := x.shape.Payload()
	if len(payload) == 0 {
		return "TRUE", nil
	}
	return "(" + joinEach(payload, " AND ", func(n string) string {
		return a + "." + sqltext.QuoteIdent(n) + " IS NOT DISTINCT FROM " + b + "." + sqltext.QuoteIdent(n)
	}) + ")", nil
}

func expandTypedColumns(x *expansion, args []string) (string, error) {
	if err := wantAliases(args, 0); err != nil {
		return "", err
	}
	s := x.shape
	return joinEach(s.names(), ", ", func(n string) string {
		return "TRY_CAST(" + sqltext.QuoteIdent(n) + " AS " + s.TypeOf(n) + ") AS " + sqltext.QuoteIdent(n)
	}), nil
}

func expandTypeError(x *expansion, args []string) (string, error) {
	if err := wantAliases(args, 0); err != nil {
		return "", err
	}
	s := x.shape
	return "CASE " + joinEach(s.names(), " ", func(n string) string {
		return "WHEN " + sqltext.QuoteIdent(n) + " IS NOT NULL AND TRY_CAST(" + sqltext.QuoteIdent(n) + " AS " + s.TypeOf(n) + ") IS NULL THEN " + sqltext.SQLString(n)
	}) + " END", nil
}

func expandRawStruct(x *expansion, args []string) (string, error) {
	if err := wantAliases(args, 0); err != nil {
		return "", err
	}
	return "struct_pack(" + joinEach(x.shape.names(), ", ", func(n string) string {
		return sqltext.QuoteIdent(n) + " := CAST(" + sqltext.QuoteIdent(n) + " AS VARCHAR)"
	}) + ")", nil
}

func expandRawFields(x *expansion, args []string) (string, error) {
	if err := wantAliases(args, 1); err != nil {
		return "", err
	}
	ref := quoteRef(args[0])
	return joinEach(x.shape.names(), ", ", func(n string) string {
		return "struct_extract(" + ref + ", " + sqltext.SQLString(n) + ")"
	}), nil
}

func expandAggNonKey(x *expansion, args []string) (string, error) {
	if err := wantAliases(args, 0); err != nil {
		return "", err
	}
	s := x.shape
	return joinEach(s.nonKey(), ", ", func(n string) string {
		if n == s.Order {
			return "any_value(" + sqltext.QuoteIdent(n) + ") AS " + sqltext.QuoteIdent(n)
		}
		return "CASE WHEN count(*) = 1 THEN any_value(" + sqltext.QuoteIdent(n) + ") END AS " + sqltext.QuoteIdent(n)
	}), nil
}

func expandNullPayload(x *expansion, args []string) (string, error) {
	if err := wantAliases(args, 0); err != nil {
		return "", err
	}
	return joinEach(x.shape.Payload(), ", ", func(n string) string { return sqltext.QuoteIdent(n) + " = NULL" }), nil
}

func expandSetNonKey(x *expansion, args []string) (string, error) {
	if err := wantAliases(args, 1); err != nil {
		return "", err
	}
	p := quoteRef(args[0])
	return joinEach(x.shape.nonKey(), ", ", func(n string) string { return sqltext.QuoteIdent(n) + " = " + p + "." + sqltext.QuoteIdent(n) }), nil
}

// columnDefs expands to each column with its declared type, or VARCHAR
// when text is set.
func columnDefs(text bool) func(x *expansion, args []string) (string, error) {
	return func(x *expansion, args []string) (string, error) {
		if err := wantAliases(args, 0); err != nil {
			return "", err
		}
		s := x.shape
		return joinEach(s.names(), ", ", func(n string) string {
			if text {
				return sqltext.QuoteIdent(n) + " VARCHAR"
			}
			return sqltext.QuoteIdent(n) + " " + s.TypeOf(n)
		}), nil
	}
}

func expandAddTextColumns(x *expansion, args []string) (string, error) {
	if len(args) != 1 || !SuffixRef.MatchString(args[0]) {
		return "", errors.New("want {{add_text_columns:_suffix}}")
	}
	t := sqltext.QuoteIdent(x.table + args[0])
	return joinEach(x.shape.names(), "; ", func(n string) string {
		return "ALTER TABLE " + t + " ADD COLUMN IF NOT EXISTS " + sqltext.QuoteIdent(n) + " VARCHAR"
	}), nil
}

func expandInputOp(x *expansion, args []string) (string, error) {
	if err := wantAliases(args, 0); err != nil {
		return "", err
	}
	if len(x.upstream) > 0 {
		return sqltext.QuoteIdent("idem_op"), nil
	}
	return "'upsert'", nil
}
