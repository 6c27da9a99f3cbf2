package source

import (
	"context"
	"database/sql"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// One rule reads a position from text: parsePosition (the retained-input
// filters of erase and the scrub) and PositionSQL (erase over stored rows)
// agree on every case, and the rule is the versioned_changes stage step's.
func TestPositionRule(t *testing.T) {
	t.Parallel()
	cases := []struct {
		text string
		want sql.NullInt64
	}{
		{"5", sql.NullInt64{Int64: 5, Valid: true}},
		{" \t+42\r\n", sql.NullInt64{Int64: 42, Valid: true}},
		{"0007", sql.NullInt64{Int64: 7, Valid: true}},
		{"9223372036854775807", sql.NullInt64{Int64: 9223372036854775807, Valid: true}},
		{"9223372036854775808", sql.NullInt64{}},
		{"1e18", sql.NullInt64{}},
		{"7_000", sql.NullInt64{}},
		{"\u00a0 999", sql.NullInt64{}},
		{"++888", sql.NullInt64{}},
		{"-3", sql.NullInt64{}},
		{"1.5", sql.NullInt64{}},
		{"0x10", sql.NullInt64{}},
		{"", sql.NullInt64{}},
		{"  ", sql.NullInt64{}},
	}
	ctx := context.Background()
	db, err := open(ctx, "")
	require.NoError(t, err)
	defer db.Close()
	for _, c := range cases {
		require.Equal(t, c.want, parsePosition(c.text), "parsePosition(%q)", c.text)
		var got sql.NullInt64
		require.NoError(t, db.QueryRowContext(ctx, "SELECT "+PositionSQL("t")+" FROM (SELECT CAST(? AS VARCHAR) AS t)", c.text).Scan(&got))
		require.Equal(t, c.want, got, "PositionSQL(%q)", c.text)
	}
	stage, err := os.ReadFile("../../pipelines/versioned_changes/transform/v1/01_stage.sql")
	require.NoError(t, err)
	require.True(t, strings.Contains(string(stage), "regexp_full_match(raw_version, '"+positionPattern+"')"), "the stage step reads source_version by positionPattern")
	require.True(t, strings.Contains(string(stage), "regexp_replace(raw_version, '"+positionStrip+"', '', 'g') AS BIGINT)"), "the stage step strips by positionStrip")
}
