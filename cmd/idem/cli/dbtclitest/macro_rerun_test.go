package dbtclitest

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idem-dev/idem/cmd/idem/cli/internal/clitest"
)

// TestRerunAfterMacroEdit: a macro's text is part of the key of every job
// that uses it, so a snapshot built before the macro was edited reruns with
// the text it ran with, which the database kept: a model written as one
// file and a versioned one both reproduce their first snapshot after the
// edit. Expiry forgets the texts no kept snapshot was built with.
func TestRerunAfterMacroEdit(t *testing.T) {
	t.Parallel()
	p := clitest.NewProject(t)
	p.Write("macros/scaled.sql", "CREATE MACRO scaled(x) AS x * 2;\n")
	p.FileModel("totals", "p", []string{"src"}, []string{"zone"}, "SELECT zone, scaled(sum(amount)) AS total FROM {{upstream:src}} GROUP BY zone\n")
	p.Model("daily", "p", []string{"src"}, []string{"day"}, "", "SELECT day, scaled(sum(amount)) AS total FROM {{upstream:src}} GROUP BY day\n")
	r := p.Idem("run", p.Dir, "--exclude", "zones")
	require.Equal(t, 0, r.Code, r.Stdout+r.Stderr)

	p.Write("macros/scaled.sql", "CREATE MACRO scaled(x) AS x * 3;\n")
	r = p.Idem("run", p.Dir, "--exclude", "zones")
	require.Equal(t, 0, r.Code, r.Stdout+r.Stderr)
	require.Contains(t, r.Stdout, "totals: loaded")
	require.Contains(t, r.Stdout, "daily: loaded")
	require.Equal(t, []string{"1 51.75", "2 16.50"}, clitest.QueryStrs(t, p.DB("p"), `SELECT zone || ' ' || total FROM totals ORDER BY zone`))

	rerun := func(name, snapshot string) {
		t.Helper()
		r := p.Idem("rerun", p.Path(name+".toml"), "--snapshot", snapshot, "--json")
		require.Equal(t, 0, r.Code, "%s@%s: %s", name, snapshot, r.Stdout+r.Stderr)
		var rr struct {
			Reproduced bool `json:"reproduced"`
		}
		require.NoError(t, json.Unmarshal([]byte(r.Stdout), &rr), r.Stdout)
		require.True(t, rr.Reproduced, "%s@%s: %s", name, snapshot, r.Stdout)
	}
	rerun("totals", "1")
	rerun("daily", "1")

	// Expiry forgets the texts only expired snapshots were built with: of
	// three model texts and three macro texts, the last of each stays, and
	// the kept snapshot still reruns.
	p.Write("macros/scaled.sql", "CREATE MACRO scaled(x) AS x * 4;\n")
	r = p.Idem("run", p.Path("totals.toml"))
	require.Equal(t, 0, r.Code, r.Stdout+r.Stderr)
	texts := `SELECT job || ' ' || count(*) FROM idem.model_texts WHERE job IN ('totals', 'macros/totals') GROUP BY job ORDER BY job`
	require.Equal(t, []string{"macros/totals 3", "totals 3"}, clitest.QueryStrs(t, p.DB("p"), texts))
	r = p.Idem("expire", p.Path("totals.toml"), "--keep-snapshots", "1")
	require.Equal(t, 0, r.Code, r.Stdout+r.Stderr)
	require.Equal(t, []string{"macros/totals 1", "totals 1"}, clitest.QueryStrs(t, p.DB("p"), texts))
	rerun("totals", "3")
}
