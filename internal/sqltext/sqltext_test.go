package sqltext

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestCreatedRelations: the names a text creates, lower case, all of them
// or the temp ones only, never inside comments or strings.
func TestCreatedRelations(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, text string
		all, temp  []string
	}{
		{"temp table", "CREATE TEMP TABLE a AS SELECT 1", []string{"a"}, []string{"a"}},
		{"temporary view quoted", "create or replace temporary view \"B c\" as select 1", []string{"b c"}, []string{"b c"}},
		{"quoted with a quote", `CREATE TEMP TABLE "a""b" AS SELECT 1`, []string{`a"b`}, []string{`a"b`}},
		{"not temp", "CREATE TABLE main.x (id BIGINT); CREATE VIEW v AS SELECT 1", []string{"x", "v"}, nil},
		{"qualified temp", "CREATE TEMP TABLE IF NOT EXISTS temp.main.y (id BIGINT)", []string{"y"}, []string{"y"}},
		{"several", "CREATE OR REPLACE TEMP TABLE s AS SELECT 1;\nCREATE TABLE {{table}} (a INT);\nCREATE TEMP VIEW o AS SELECT 2;", []string{"s", "o"}, []string{"s", "o"}},
		{"comment", "-- CREATE TEMP TABLE z AS SELECT 1\n/* CREATE TEMP TABLE w */ SELECT 1", nil, nil},
		{"string", "SELECT 'CREATE TEMP TABLE z AS x'", nil, nil},
		{"macro", "CREATE OR REPLACE TEMP MACRO m(x) AS x + 1", nil, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, c.all, CreatedRelations(c.text))
			require.Equal(t, c.temp, createdRelations(c.text, true))
		})
	}
}
