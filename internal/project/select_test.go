package project

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idem-dev/idem/internal/job"
	"github.com/idem-dev/idem/internal/report"
)

// diamonds: sources a and b feed c; c feeds d and e, which both feed f (a
// diamond), f feeds h; a also feeds g; z stands alone. d, e and f are
// models under models/, f and h are tagged mart.
func diamonds(t *testing.T) (*Project, map[string]*job.Job) {
	t.Helper()
	jobs := []*job.Job{
		mk("x", "a"), mk("x", "b"), mk("x", "c", "a", "b"), mk("x", "d", "c"), mk("x", "e", "c"),
		mk("x", "f", "d", "e"), mk("x", "g", "a"), mk("x", "h", "f"), mk("x", "z"),
	}
	by := map[string]*job.Job{}
	for _, j := range jobs {
		by[j.Name] = j
		switch j.Name {
		case "d", "e":
			j.ModelDir = filepath.Join("models", j.Name)
			j.ModelFile = filepath.Join(j.ModelDir, "v1.sql")
		case "f":
			j.ModelDir = "models"
			j.ModelFile = filepath.Join("models", "f.sql")
			j.Tags = []string{"mart"}
		case "h":
			j.Tags = []string{"mart"}
		}
	}
	p, err := New(jobs)
	require.NoError(t, err)
	return p, by
}

// TestSelectorForms: every selector form of dbt against a graph with a
// diamond, as run --select and --exclude take them.
func TestSelectorForms(t *testing.T) {
	t.Parallel()
	p, by := diamonds(t)
	modified := func() (map[*job.Job]bool, error) { return map[*job.Job]bool{by["d"]: true}, nil }
	for _, tc := range []struct {
		name             string
		selects, exclude []string
		want             []string
	}{
		{"name", []string{"c"}, nil, []string{"c"}},
		{"children", []string{"c+"}, nil, []string{"c", "d", "e", "f", "h"}},
		{"one generation of children", []string{"c+1"}, nil, []string{"c", "d", "e"}},
		{"two generations of children", []string{"c+2"}, nil, []string{"c", "d", "e", "f"}},
		{"parents", []string{"+f"}, nil, []string{"a", "b", "c", "d", "e", "f"}},
		{"one generation of parents", []string{"1+f"}, nil, []string{"d", "e", "f"}},
		{"two generations of parents", []string{"2+f"}, nil, []string{"c", "d", "e", "f"}},
		{"both sides with depths", []string{"1+d+1"}, nil, []string{"c", "d", "f"}},
		{"at: descendants and all their ancestors", []string{"@d"}, nil, []string{"a", "b", "c", "d", "e", "f", "h"}},
		{"at of a leaf is its ancestors", []string{"@g"}, nil, []string{"a", "g"}},
		{"union in one argument", []string{"g z"}, nil, []string{"g", "z"}},
		{"union of arguments", []string{"g", "1+c"}, nil, []string{"a", "b", "c", "g"}},
		{"intersection", []string{"c+,tag:mart"}, nil, []string{"f", "h"}},
		{"intersection of graph operators", []string{"a+,+f"}, nil, []string{"a", "c", "d", "e", "f"}},
		{"intersection and union", []string{"c+,tag:mart g"}, nil, []string{"f", "g", "h"}},
		{"exclude after select", []string{"c+"}, []string{"f+"}, []string{"c", "d", "e"}},
		{"exclude a diamond side", []string{"@e"}, []string{"d", "a b"}, []string{"c", "e", "f", "h"}},
		{"exclude alone removes from all", nil, []string{"a+"}, []string{"b", "z"}},
		{"exclude with intersection", []string{"c+"}, []string{"c+,tag:mart"}, []string{"c", "d", "e"}},
		{"path: model folder", []string{"path:models/d"}, nil, []string{"d"}},
		{"path: model file", []string{"path:models/e/v1.sql"}, nil, []string{"e"}},
		{"path: one-file model", []string{"path:models/f.sql+"}, nil, []string{"f", "h"}},
		{"path: every model under a folder", []string{"path:models"}, nil, []string{"d", "e", "f"}},
		{"path: glob over model folders", []string{"path:models/*"}, nil, []string{"d", "e", "f"}},
		{"path: job file", []string{"path:z.toml"}, nil, []string{"z"}},
		{"state:modified with children and tag", []string{"state:modified+,tag:mart"}, nil, []string{"f", "h"}},
		{"at with state:modified", []string{"@state:modified"}, nil, []string{"a", "b", "c", "d", "e", "f", "h"}},
		{"tag with parents, excluded by state", []string{"1+tag:mart"}, []string{"state:modified"}, []string{"e", "f", "h"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q, err := p.Choose(Selection{Select: tc.selects, Exclude: tc.exclude}, modified)
			require.NoError(t, err)
			require.Equal(t, tc.want, names(q.Jobs))
		})
	}
	// A selection keeps only the links among its jobs.
	q, err := p.Choose(Selection{Select: []string{"c+1"}}, nil)
	require.NoError(t, err)
	require.Empty(t, q.Upstream(q.Jobs[0]))
	require.Len(t, q.Upstream(q.Jobs[1]), 1)
}

// TestSelectorFormErrors: what does not parse or picks nothing is a usage
// error naming the flag and the selector.
func TestSelectorFormErrors(t *testing.T) {
	t.Parallel()
	p, _ := diamonds(t)
	for _, tc := range []struct {
		sel  Selection
		want string
	}{
		{Selection{Select: []string{""}}, `--select "": want NAME`},
		{Selection{Select: []string{"c,"}}, `--select "": want NAME`},
		{Selection{Select: []string{"@+c"}}, "--select @+c: @ already adds every upstream of what it picks"},
		{Selection{Select: []string{"c+x"}}, `--select "c+x": want NAME`},
		{Selection{Select: []string{"c", "nope"}}, "--select nope: no job named nope in the project (jobs: a, b, c, d, e, f, g, h, z)"},
		{Selection{Exclude: []string{"tag:daily"}}, "--exclude tag:daily: no job of the project has tag daily (tags: mart)"},
		{Selection{Select: []string{"c"}, Exclude: []string{"path:nowhere"}}, "--exclude path:nowhere: no job file of the project is nowhere, under it or matches it, nor any model SQL file or folder"},
	} {
		_, err := p.Choose(tc.sel, nil)
		require.ErrorIs(t, err, report.ErrUsage, tc.sel)
		require.ErrorContains(t, err, tc.want, tc.sel)
	}
}
