package sqltext

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

// The parse-tree readers read a node as DuckDB 1.5 and 2.0 each write it
// (json_serialize_sql of the same SQL on each, trimmed).
func TestParseTreeReaders(t *testing.T) {
	t.Parallel()
	decode := func(s string) map[string]any {
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(s), &m))
		return m
	}
	for _, v := range []struct {
		name, cte, constant, cast string
	}{
		{name: "1.5",
			cte:      `{"aliases": [], "query": {"node": {"type": "SELECT_NODE"}, "named_param_map": []}, "materialized": "CTE_MATERIALIZE_DEFAULT"}`,
			constant: `{"class": "CONSTANT", "type": "VALUE_CONSTANT", "value": {"type": {"id": "INTEGER", "type_info": null}, "is_null": false, "value": 0}}`,
			cast:     `{"class": "CAST", "type": "OPERATOR_CAST", "cast_type": {"id": "TIMESTAMP WITH TIME ZONE", "type_info": null}, "try_cast": false}`},
		{name: "2.0",
			cte:      `{"aliases": [], "materialized": "CTE_MATERIALIZE_DEFAULT", "query_node": {"type": "SELECT_NODE"}}`,
			constant: `{"class": "CONSTANT", "type": "VALUE_CONSTANT", "literal": {"kind": "INTEGER", "text": "0"}}`,
			cast: `{"class": "CAST", "type": "OPERATOR_CAST", "try_cast": false, "type_expr": {"class": "TYPE", "type": "TYPE", "type_name": "list",
				"children": [{"class": "TYPE", "type": "TYPE", "type_name": "TIMESTAMPTZ", "children": []}]}}`},
	} {
		t.Run(v.name, func(t *testing.T) {
			require.Equal(t, "SELECT_NODE", CTEQuery(decode(v.cte))["type"])
			text, ok := ConstantText(decode(v.constant))
			require.True(t, ok)
			require.Equal(t, "0", text)
			_, zoned := CastType(decode(v.cast))
			require.True(t, zoned)
		})
	}
	_, ok := ConstantText(decode(`{"class": "CONSTANT", "literal": {"kind": "NULL", "text": "NULL"}}`))
	require.False(t, ok)
	name, zoned := CastType(decode(`{"class": "CAST", "type_expr": {"class": "TYPE", "type_name": "TEXT", "children": []}}`))
	require.Equal(t, "VARCHAR", name)
	require.False(t, zoned)
}
