package dbtclitest

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idem-dev/idem/cmd/idem/cli/internal/clitest"
)

// rerunNode is one node of rerun --deep --json.
type rerunNode struct {
	Job        string       `json:"job"`
	Snapshot   int64        `json:"snapshot"`
	Reproduced bool         `json:"reproduced"`
	Above      bool         `json:"rerun_above"`
	Upstream   []*rerunNode `json:"upstream"`
}

// walk lists the nodes of the tree, depth first, as "job@snapshot", with
// " (above)" for one rebuilt by an earlier branch.
func (n *rerunNode) walk(out *[]string) {
	s := n.Job
	if n.Above {
		s += " (above)"
	}
	*out = append(*out, s)
	for _, u := range n.Upstream {
		u.walk(out)
	}
}

// TestRerunDeepDiamond: src feeds left and right, both feed top. rerun
// top --deep rebuilds each (job, snapshot) once: src once, though both
// left and right pinned it; the second pin is listed as rebuilt above with
// the first's verdict. plan over the same project takes --select @left
// and --exclude.
func TestRerunDeepDiamond(t *testing.T) {
	t.Parallel()
	p := clitest.NewProject(t)
	p.Model("left", "p", []string{"src"}, []string{"id"}, "", "SELECT id, amount FROM {{upstream:src}}\n")
	p.Model("right", "p", []string{"src"}, []string{"id"}, "", "SELECT id, zone FROM {{upstream:src}}\n")
	p.Model("top", "p", []string{"left", "right"}, []string{"id"}, "", "SELECT l.id, l.amount, r.zone FROM {{upstream:left}} AS l JOIN {{upstream:right}} AS r ON l.id = r.id\n")
	r := p.Idem("run", p.Dir, "--exclude", "zones") // no job reads it
	require.Equal(t, 0, r.Code, r.Stdout+r.Stderr)
	require.NotContains(t, r.Stdout, "zones")

	r = p.Idem("rerun", p.Path("top.toml"), "--deep", "--json")
	require.Equal(t, 0, r.Code, r.Stdout+r.Stderr)
	var root rerunNode
	require.NoError(t, json.Unmarshal([]byte(r.Stdout), &root), r.Stdout)
	var nodes []string
	root.walk(&nodes)
	require.Equal(t, []string{"top", "left", "src", "right", "src (above)"}, nodes)
	require.True(t, root.Upstream[1].Upstream[0].Reproduced)

	// The CLI takes dbt's selector forms and --exclude.
	r = p.Idem("plan", p.Dir, "--select", "@left zones", "--exclude", "right", "--json")
	require.Equal(t, 0, r.Code, r.Stdout+r.Stderr)
	var plans []struct {
		Job string `json:"job"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.Stdout), &plans), r.Stdout)
	var jobs []string
	for _, pl := range plans {
		jobs = append(jobs, pl.Job)
	}
	require.ElementsMatch(t, []string{"src", "zones", "left", "top"}, jobs)
}
