package dbtclitest

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idem-dev/idem/cmd/idem/cli/internal/clitest"
)

const ctesModel = `WITH sales AS (
    SELECT id, zone, amount FROM {{upstream:src}} WHERE amount > 0
), joined AS (
    SELECT sales.*, z.zone AS zone_name FROM sales JOIN {{upstream:zones}} AS z ON z.zone_id = sales.zone
)
SELECT * FROM joined
`

// TestPlanColumnAddedInCTE: a column appended inside the final CTE of a
// model (read by SELECT *) is non-breaking, and plan prints the rows it
// compared, human and JSON; a filter changed in a CTE is breaking and
// prints how many keys change.
func TestPlanColumnAddedInCTE(t *testing.T) {
	t.Parallel()
	p := clitest.NewProject(t)
	p.Model("sales", "p", []string{"src", "zones"}, []string{"id"}, "", ctesModel)
	r := p.Idem("run", p.Dir)
	require.Equal(t, 0, r.Code, r.Stdout+r.Stderr)

	type change struct {
		Class        string   `json:"class"`
		ColumnsAdded []string `json:"columns_added"`
		RowsCompared bool     `json:"rows_compared"`
		RowsChanged  int64    `json:"rows_changed"`
		Reason       string   `json:"reason"`
	}
	plan := func() (change, string) {
		t.Helper()
		r := p.Idem("plan", p.Path("sales.toml"), "--json")
		require.Equal(t, 0, r.Code, r.Stdout+r.Stderr)
		var pl struct {
			ModelChange *change `json:"model_change"`
		}
		require.NoError(t, json.Unmarshal([]byte(r.Stdout), &pl), r.Stdout)
		require.NotNil(t, pl.ModelChange, r.Stdout)
		h := p.Idem("plan", p.Path("sales.toml"))
		require.Equal(t, 0, h.Code, h.Stdout+h.Stderr)
		return *pl.ModelChange, h.Stdout
	}

	p.NextModelVersion("sales", strings.Replace(ctesModel, "z.zone AS zone_name FROM", "z.zone AS zone_name, sales.amount * 2 AS doubled FROM", 1))
	mc, human := plan()
	require.Equal(t, change{Class: "non-breaking", ColumnsAdded: []string{"doubled"}, RowsCompared: true, Reason: "1 column(s) added; the other columns keep every row"}, mc)
	require.Contains(t, human, "change    non-breaking: 1 column(s) added")
	require.Contains(t, human, "rows      0 key(s) change in the columns kept")

	p.NextModelVersion("sales", strings.Replace(ctesModel, "amount > 0", "amount > 6", 1))
	mc, human = plan()
	require.Equal(t, "breaking", mc.Class)
	require.True(t, mc.RowsCompared)
	require.EqualValues(t, 1, mc.RowsChanged, mc.Reason) // id 2 (5.50) filtered out
	require.Contains(t, mc.Reason, "the query changed beyond its select list")
	require.Contains(t, human, "rows      1 key(s) change in the columns kept")
}
