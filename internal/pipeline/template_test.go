package pipeline

import (
	"io/fs"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idem-dev/idem/pipelines"
)

// Shapes the placeholder cases expand against.
var (
	// full: a composite key, an ordering column and two payload columns.
	shapeFull = &Shape{
		Columns: []Column{{Name: "id", Type: "BIGINT"}, {Name: "region", Type: "VARCHAR"}, {Name: "v", Type: "BIGINT"}, {Name: "amount", Type: "DECIMAL(18,3)"}, {Name: "note", Type: "VARCHAR"}},
		Key:     []string{"id", "region"},
		Order:   "v",
	}
	// noOrder: no ordering column.
	shapeNoOrder = &Shape{Columns: []Column{{Name: "id", Type: "BIGINT"}, {Name: "val", Type: "VARCHAR"}}, Key: []string{"id"}}
	// noPayload: key and ordering column only.
	shapeNoPayload = &Shape{Columns: []Column{{Name: "id", Type: "BIGINT"}, {Name: "v", Type: "BIGINT"}}, Key: []string{"id"}, Order: "v"}
	// model: a model knows only its key.
	shapeModel = &Shape{Key: []string{"k"}}
)

// placeholderCase is one use of a placeholder: text expanded for target t
// with shape and upstream jobs; want is the expansion, or err the whole
// error text (which names the placeholder as written).
type placeholderCase struct {
	name     string // the placeholder the case is about
	text     string
	shape    *Shape
	upstream []string
	want     string
	err      string
}

func placeholderCases() []placeholderCase {
	const generic = ": only generic pipelines (generic = true) take their columns from the job"
	return []placeholderCase{
		{name: "table", text: "{{table}}", want: `"t"`},
		{name: "table", text: "{{ table }}", shape: shapeFull, want: `"t"`},
		{name: "table", text: "{{table:_outcomes}}", want: `"t_outcomes"`},
		{name: "table", text: "{{table:a-b}}", err: "placeholder {{table:a-b}}: want {{table}} or {{table:_suffix}}"},
		{name: "table", text: "{{table:_a:_b}}", err: "placeholder {{table:_a:_b}}: want {{table}} or {{table:_suffix}}"},
		{name: "table", text: "{{table:}}", err: "placeholder {{table:}}: want {{table}} or {{table:_suffix}}"},

		{name: "upstream", text: "{{upstream:trips}}", upstream: []string{"trips"}, want: `temp."idem_upstream_trips"`},
		{name: "upstream", text: "{{upstream:zones}}", upstream: []string{"trips"}, err: "placeholder {{upstream:zones}}: job zones is not a declared upstream: add it to [input] upstream"},
		{name: "upstream", text: "{{upstream}}", err: "placeholder {{upstream}}: want {{upstream:JOB}}"},
		{name: "upstream", text: "{{upstream:1x}}", upstream: []string{"1x"}, err: "placeholder {{upstream:1x}}: want {{upstream:JOB}}"},
		{name: "upstream", text: "{{upstream:a:b}}", upstream: []string{"a"}, err: "placeholder {{upstream:a:b}}: want {{upstream:JOB}}"},

		{name: "columns", text: "{{columns}}", shape: shapeFull, want: `"id", "region", "v", "amount", "note"`},
		{name: "columns", text: "{{columns:p}}", shape: shapeNoOrder, want: `"p"."id", "p"."val"`},
		{name: "columns", text: "{{columns:p.raw}}", shape: shapeNoOrder, want: `"p"."raw"."id", "p"."raw"."val"`},
		{name: "columns", text: "{{columns:a:b}}", shape: shapeFull, err: "placeholder {{columns:a:b}}: takes 1 argument(s), got 2"},
		{name: "columns", text: "{{columns:1p}}", shape: shapeFull, err: `placeholder {{columns:1p}}: argument "1p" is not a table alias`},
		{name: "columns", text: "{{columns}}", err: "placeholder {{columns}}" + generic},

		{name: "key", text: "{{key}}", shape: shapeFull, want: `"id", "region"`},
		{name: "key", text: "{{key:t}}", shape: shapeModel, want: `"t"."k"`},
		{name: "key", text: "{{key:x;}}", shape: shapeFull, err: `placeholder {{key:x;}}: argument "x;" is not a table alias`},
		{name: "key", text: "{{key}}", err: "placeholder {{key}}" + generic},

		{name: "nonkey", text: "{{nonkey}}", shape: shapeFull, want: `"v", "amount", "note"`},
		{name: "nonkey", text: "{{nonkey:s}}", shape: shapeNoOrder, want: `"s"."val"`},
		{name: "nonkey", text: "{{nonkey:s:t}}", shape: shapeFull, err: "placeholder {{nonkey:s:t}}: takes 1 argument(s), got 2"},

		{name: "order", text: "{{order}}", shape: shapeFull, want: `"v"`},
		{name: "order", text: "{{order:t}}", shape: shapeFull, want: `"t"."v"`},
		{name: "order", text: "{{order:t}}", shape: shapeNoOrder, want: "CAST(NULL AS BIGINT)"},
		{name: "order", text: "{{order:a:b}}", shape: shapeFull, err: "placeholder {{order:a:b}}: takes 1 argument(s), got 2"},
		{name: "order", text: "{{order}}", err: "placeholder {{order}}" + generic},

		{name: "order_is_null", text: "{{order_is_null}}", shape: shapeFull, want: `"v" IS NULL`},
		{name: "order_is_null", text: "{{order_is_null}}", shape: shapeNoOrder, want: "FALSE"},
		{name: "order_is_null", text: "{{order_is_null:t}}", shape: shapeFull, err: "placeholder {{order_is_null:t}}: takes 0 argument(s), got 1"},

		{name: "key_is_null", text: "{{key_is_null}}", shape: shapeFull, want: `("id" IS NULL OR "region" IS NULL)`},
		{name: "key_is_null", text: "{{key_is_null}}", shape: shapeNoOrder, want: `("id" IS NULL)`},
		{name: "key_is_null", text: "{{key_is_null:t}}", shape: shapeFull, err: "placeholder {{key_is_null:t}}: takes 0 argument(s), got 1"},

		{name: "key_match", text: "{{key_match:c:t}}", shape: shapeFull, want: `"c"."id" = "t"."id" AND "c"."region" = "t"."region"`},
		{name: "key_match", text: "{{key_match:s:d}}", shape: shapeModel, want: `"s"."k" = "d"."k"`},
		{name: "key_match", text: "{{key_match:c}}", shape: shapeFull, err: "placeholder {{key_match:c}}: takes 2 argument(s), got 1"},
		{name: "key_match", text: "{{key_match:c:t-1}}", shape: shapeFull, err: `placeholder {{key_match:c:t-1}}: argument "t-1" is not a table alias`},

		{name: "payload_same", text: "{{payload_same:c:t}}", shape: shapeFull, want: `("c"."amount" IS NOT DISTINCT FROM "t"."amount" AND "c"."note" IS NOT DISTINCT FROM "t"."note")`},
		{name: "payload_same", text: "{{payload_same:c:t}}", shape: shapeNoPayload, want: "TRUE"},
		{name: "payload_same", text: "{{payload_same}}", shape: shapeFull, err: "placeholder {{payload_same}}: takes 2 argument(s), got 0"},

		{name: "typed_columns", text: "{{typed_columns}}", shape: shapeNoOrder, want: `TRY_CAST("id" AS BIGINT) AS "id", TRY_CAST("val" AS VARCHAR) AS "val"`},
		{name: "typed_columns", text: "{{typed_columns:p}}", shape: shapeNoOrder, err: "placeholder {{typed_columns:p}}: takes 0 argument(s), got 1"},

		{name: "type_error", text: "{{type_error}}", shape: shapeNoOrder, want: `CASE WHEN "id" IS NOT NULL AND TRY_CAST("id" AS BIGINT) IS NULL THEN 'id' WHEN "val" IS NOT NULL AND TRY_CAST("val" AS VARCHAR) IS NULL THEN 'val' END`},
		{name: "type_error", text: "{{type_error:x}}", shape: shapeNoOrder, err: "placeholder {{type_error:x}}: takes 0 argument(s), got 1"},

		{name: "raw_struct", text: "{{raw_struct}}", shape: shapeNoOrder, want: `struct_pack("id" := CAST("id" AS VARCHAR), "val" := CAST("val" AS VARCHAR))`},
		{name: "raw_struct", text: "{{raw_struct:r}}", shape: shapeNoOrder, err: "placeholder {{raw_struct:r}}: takes 0 argument(s), got 1"},

		{name: "raw_fields", text: "{{raw_fields:_raw}}", shape: shapeNoOrder, want: `struct_extract("_raw", 'id'), struct_extract("_raw", 'val')`},
		{name: "raw_fields", text: "{{raw_fields}}", shape: shapeNoOrder, err: "placeholder {{raw_fields}}: takes 1 argument(s), got 0"},

		{name: "agg_nonkey", text: "{{agg_nonkey}}", shape: shapeFull, want: `any_value("v") AS "v", CASE WHEN count(*) = 1 THEN any_value("amount") END AS "amount", CASE WHEN count(*) = 1 THEN any_value("note") END AS "note"`},
		{name: "agg_nonkey", text: "{{agg_nonkey:g}}", shape: shapeFull, err: "placeholder {{agg_nonkey:g}}: takes 0 argument(s), got 1"},

		{name: "null_payload", text: "{{null_payload}}", shape: shapeFull, want: `"amount" = NULL, "note" = NULL`},
		{name: "null_payload", text: "{{null_payload}}", shape: shapeNoPayload, want: ""},
		{name: "null_payload", text: "{{null_payload:t}}", shape: shapeFull, err: "placeholder {{null_payload:t}}: takes 0 argument(s), got 1"},

		{name: "set_nonkey", text: "{{set_nonkey:d}}", shape: shapeFull, want: `"v" = "d"."v", "amount" = "d"."amount", "note" = "d"."note"`},
		{name: "set_nonkey", text: "{{set_nonkey}}", shape: shapeFull, err: "placeholder {{set_nonkey}}: takes 1 argument(s), got 0"},

		{name: "column_defs", text: "{{column_defs}}", shape: shapeFull, want: `"id" BIGINT, "region" VARCHAR, "v" BIGINT, "amount" DECIMAL(18,3), "note" VARCHAR`},
		{name: "column_defs", text: "{{column_defs:x}}", shape: shapeFull, err: "placeholder {{column_defs:x}}: takes 0 argument(s), got 1"},

		{name: "text_column_defs", text: "{{text_column_defs}}", shape: shapeNoOrder, want: `"id" VARCHAR, "val" VARCHAR`},
		{name: "text_column_defs", text: "{{text_column_defs:x}}", shape: shapeNoOrder, err: "placeholder {{text_column_defs:x}}: takes 0 argument(s), got 1"},

		{name: "add_text_columns", text: "{{add_text_columns:_outcomes}}", shape: shapeNoOrder, want: `ALTER TABLE "t_outcomes" ADD COLUMN IF NOT EXISTS "id" VARCHAR; ALTER TABLE "t_outcomes" ADD COLUMN IF NOT EXISTS "val" VARCHAR`},
		{name: "add_text_columns", text: "{{add_text_columns}}", shape: shapeNoOrder, err: "placeholder {{add_text_columns}}: want {{add_text_columns:_suffix}}"},
		{name: "add_text_columns", text: "{{add_text_columns:a.b}}", shape: shapeNoOrder, err: "placeholder {{add_text_columns:a.b}}: want {{add_text_columns:_suffix}}"},

		{name: "input_op", text: "{{input_op}}", shape: shapeNoOrder, want: "'upsert'"},
		{name: "input_op", text: "{{input_op}}", shape: shapeNoOrder, upstream: []string{"u"}, want: `"idem_op"`},
		{name: "input_op", text: "{{input_op:x}}", shape: shapeNoOrder, err: "placeholder {{input_op:x}}: takes 0 argument(s), got 1"},
		{name: "input_op", text: "{{input_op}}", err: "placeholder {{input_op}}" + generic},
	}
}

// TestPlaceholders: each placeholder of the template language, valid and
// invalid uses; every one in templateFuncs has at least one of each.
func TestPlaceholders(t *testing.T) {
	t.Parallel()
	valid, invalid := map[string]bool{}, map[string]bool{}
	for _, c := range placeholderCases() {
		t.Run(c.name+"/"+c.text, func(t *testing.T) {
			got, err := ExpandTemplate(c.text, "t", c.shape, c.upstream)
			if c.err != "" {
				require.EqualError(t, err, c.err)
				require.Equal(t, c.text, got, "a placeholder that fails stays as written")
				return
			}
			require.NoError(t, err)
			require.Equal(t, c.want, got)
		})
		if c.err == "" {
			valid[c.name] = true
		} else {
			invalid[c.name] = true
		}
	}
	for name := range templateFuncs() {
		require.True(t, valid[name], "placeholder %s has no valid case", name)
		require.True(t, invalid[name], "placeholder %s has no invalid case", name)
	}
	for name := range valid {
		require.Contains(t, templateFuncs(), name, "case of a placeholder the language does not have")
	}
}

// TestExpandTemplate: unknown placeholders, several in one text, text that
// is not a placeholder.
func TestExpandTemplate(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		text  string
		shape *Shape
		want  string
		err   string
	}{
		{"unknown", "{{nope}}", shapeFull, "", `placeholder {{nope}}: unknown placeholder "nope"`},
		{"unknown outside a generic pipeline", "{{nope}}", nil, "", "placeholder {{nope}}: only generic pipelines (generic = true) take their columns from the job"},
		{"several", "INSERT INTO {{table}} ({{key}}) SELECT {{key:s}} FROM s", shapeModel, `INSERT INTO "t" ("k") SELECT "s"."k" FROM s`, ""},
		{"the first error", "{{table}} {{key:1}} {{nope}}", shapeFull, "", `placeholder {{key:1}}: argument "1" is not a table alias`},
		{"not placeholders", "SELECT '{{ Table }}', '{{}}', '{x}', '{{table', 'table}}'", nil, "SELECT '{{ Table }}', '{{}}', '{x}', '{{table', 'table}}'", ""},
		{"model placeholder is left to wrapModel", "SELECT 1", shapeModel, "SELECT 1", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			got, err := ExpandTemplate(c.text, "t", c.shape, nil)
			if c.err != "" {
				require.EqualError(t, err, c.err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, c.want, got)
		})
	}
}

// TestBuiltinPlaceholders: every placeholder the built-in pipelines use is
// one of the language, but {{model}}, which wrapModel replaces first.
func TestBuiltinPlaceholders(t *testing.T) {
	t.Parallel()
	funcs := templateFuncs()
	var used []string
	err := fs.WalkDir(pipelines.FS, ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".sql") {
			return err
		}
		text, err := fs.ReadFile(pipelines.FS, path)
		if err != nil {
			return err
		}
		for _, m := range Placeholder.FindAllStringSubmatch(string(text), -1) {
			if m[0] == ModelPlaceholder {
				continue
			}
			require.Contains(t, funcs, m[1], "%s: %s", path, m[0])
			if !slices.Contains(used, m[1]) {
				used = append(used, m[1])
			}
		}
		return nil
	})
	require.NoError(t, err)
	require.Subset(t, used, []string{"table", "key", "key_match", "typed_columns", "add_text_columns"}, "the walk found the built-ins' placeholders")
}
