package docs

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestModelColumnDocs: a trailing -- comment on a line of a model's SELECT
// list describes the column that line names (its alias, else its last
// identifier); comments elsewhere, and -- inside quotes, do not.
func TestModelColumnDocs(t *testing.T) {
	t.Parallel()
	sql := `-- Per day: the model's description, not a column's.
SELECT t.pickup_day,              -- the day the trip began
       "odd ""name""",            -- quoted
       count(*) AS trips,         -- trips that day
       'a--b' AS dashes,
       extract(year FROM t.pickup_day) AS year,  -- the year (FROM in parentheses)
       sum(fare)   AS   Fares     --   padded   
FROM {{upstream:trips_clean}} AS t -- not a column
WHERE fare > 0                    -- nor this
GROUP BY ALL
`
	require.Equal(t, map[string]string{
		"pickup_day": "the day the trip began",
		`odd "name"`: "quoted",
		"trips":      "trips that day",
		"Fares":      "padded",
		"year":       "the year (FROM in parentheses)",
	}, modelColumnDocs(sql))
	require.Equal(t, map[string]string{"x": "one line"}, modelColumnDocs("SELECT 1 AS x -- one line\n"))
	require.Empty(t, modelColumnDocs("SELECT a, b FROM t -- a comment after FROM on the same line\n"))
	require.Empty(t, modelColumnDocs("-- only a comment\n"))
	withCTE := "WITH trips AS (\n  SELECT *, fare AS f -- a CTE's\n  FROM {{upstream:trips}}\n)\nSELECT f,  -- the model's\n  day  -- its day\nFROM trips\n"
	require.Equal(t, map[string]string{"f": "the model's", "day": "its day"}, modelColumnDocs(withCTE))
}

// TestModelColumnDocsLexer: quotes and comments are read as DuckDB's
// lexer reads them (sqltext.MaskSQL): a -- inside a dollar-quoted string or
// an E'...' string with an escaped quote is no comment, and a parenthesis
// there leaves the list's depth alone; a FROM or a -- inside a /* */
// comment neither ends the list nor starts a description.
func TestModelColumnDocsLexer(t *testing.T) {
	t.Parallel()
	sql := `SELECT $$it's -- no comment$$ AS dollars,    -- a dollar-quoted string
       $tag$ ( $tag$ AS tagged,                   -- a tagged one, a parenthesis inside
       E'it\'s (' AS escaped,                     -- an E'' string
       /* FROM here */ zone,                      -- after a block comment
       fare /* -- not a description */ AS fare_usd,  -- the fare
       tip /* multi
       FROM line */ AS tip,                       -- the tip
       'plain' AS plain
FROM {{upstream:trips}} -- not a column
`
	require.Equal(t, map[string]string{
		"dollars":  "a dollar-quoted string",
		"tagged":   "a tagged one, a parenthesis inside",
		"escaped":  "an E'' string",
		"zone":     "after a block comment",
		"fare_usd": "the fare",
		"tip":      "the tip",
	}, modelColumnDocs(sql))
}

// TestModelColumnDocsAsDocumented: the model of docs/projects.md's "Column
// descriptions" gives the descriptions the page says it gives.
func TestModelColumnDocsAsDocumented(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile(filepath.Join("..", "..", "docs", "projects.md"))
	require.NoError(t, err)
	text := string(b)
	i := strings.Index(text, "**Column descriptions**")
	require.GreaterOrEqual(t, i, 0, "docs/projects.md describes column descriptions")
	m := regexp.MustCompile("(?s)```sql\n(.*?)```").FindStringSubmatch(text[i:])
	require.NotNil(t, m, "its SQL example")
	require.Equal(t, map[string]string{
		"trips": "clean trips picked up that day in the zone",
		"fares": "their fares, in dollars",
	}, modelColumnDocs(m[1]))
}
