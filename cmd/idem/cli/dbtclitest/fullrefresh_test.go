package dbtclitest

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idem-dev/idem/cmd/idem/cli/internal/clitest"
)

// TestFullRefresh: run --full-refresh rebuilds a model whose key did not
// change as a new snapshot, which rerun reproduces; a project's apply
// jobs run as they would; a single apply job given an input is refused
// (exit 2) and nothing is committed.
func TestFullRefresh(t *testing.T) {
	t.Parallel()
	p := clitest.NewProject(t)
	p.Model("totals", "p", []string{"src"}, []string{"zone"}, "", "SELECT zone, sum(amount) AS total FROM {{upstream:src}} GROUP BY zone\n")
	r := p.Idem("run", p.Dir)
	require.Equal(t, 0, r.Code, r.Stdout+r.Stderr)
	r = p.Idem("run", p.Path("totals.toml"))
	require.Equal(t, 0, r.Code, r.Stdout+r.Stderr)
	require.Contains(t, r.Stdout, "totals: skipped")

	type result struct {
		Job         string `json:"job"`
		Decision    string `json:"decision"`
		Snapshot    int64  `json:"snapshot"`
		FullRefresh bool   `json:"full_refresh"`
	}
	r = p.Idem("run", p.Path("totals.toml"), "--full-refresh", "--json")
	require.Equal(t, 0, r.Code, r.Stdout+r.Stderr)
	var res result
	require.NoError(t, json.Unmarshal([]byte(r.Stdout), &res), r.Stdout)
	require.Equal(t, result{Job: "totals", Decision: "loaded", Snapshot: 2, FullRefresh: true}, res)
	require.Equal(t, []string{"1 17.25", "2 5.50"}, clitest.QueryStrs(t, p.DB("p"), `SELECT zone || ' ' || total FROM totals ORDER BY zone`))

	r = p.Idem("rerun", p.Path("totals.toml"), "--json")
	require.Equal(t, 0, r.Code, r.Stdout+r.Stderr)
	var rr struct {
		Snapshot   int64 `json:"snapshot"`
		Reproduced bool  `json:"reproduced"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.Stdout), &rr), r.Stdout)
	require.Equal(t, int64(2), rr.Snapshot)
	require.True(t, rr.Reproduced)

	// An apply job alone is rebuilt from its batches (TestFullRefreshApply):
	// it takes no input of its own.
	before := clitest.CaptureState(t, p.DB("p"))
	r = p.Idem("run", p.Path("src.toml"), "--full-refresh", "--input", p.Path("input/src.csv"))
	require.Equal(t, 2, r.Code, r.Stdout+r.Stderr)
	require.Contains(t, r.Stderr, "--full-refresh of apply job src rebuilds it from the batches it applied: it takes no input, batch or bounds")
	require.Equal(t, before, clitest.CaptureState(t, p.DB("p")))

	r = p.Idem("run", p.Dir, "--full-refresh", "--select", "+totals")
	require.Equal(t, 0, r.Code, r.Stdout+r.Stderr)
	require.Contains(t, r.Stdout, "src: already_committed")
	require.Contains(t, r.Stdout, "totals: loaded (full refresh)")
}
