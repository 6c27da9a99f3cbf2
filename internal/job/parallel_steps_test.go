package job_test

import (
	"io/fs"
	"path"
	"testing"

	"github.com/idem-dev/idem/pipelines"
	"github.com/stretchr/testify/require"
)

// TestParallelSteps: only a built-in pipeline's own statements may run on
// DuckDB's threads; a model, a pipeline from a folder, a quality rule or
// a sql audit is the user's SQL, whose steps run on one thread.
func TestParallelSteps(t *testing.T) {
	t.Parallel()
	vc := "name = \"j\"\npipeline = \"versioned_changes\"\ntransform_version = 1\nschema_version = 1\n[input]\npath = \"in.jsonl\"\n"
	// The versioned_changes pipeline copied into the job's folder.
	folder := map[string]string{}
	require.NoError(t, fs.WalkDir(pipelines.FS, "versioned_changes", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(pipelines.FS, p)
		folder[path.Join("pipelines", p)] = string(b)
		return err
	}))
	for _, c := range []struct {
		name, text string
		files      map[string]string
		want       bool
	}{
		{"built-in", vc, nil, true},
		{"built-in with a unique audit", vc + "[[audit]]\nkind = \"unique\"\ncolumns = [\"entity_id\"]\n", nil, true},
		{"built-in with a sql audit", vc + "[[audit]]\nkind = \"sql\"\nsql = \"SELECT * FROM {{table}} WHERE value = ''\"\n", nil, false},
		{"built-in with a quality rule", vc + "[[quality.rules]]\nname = \"short\"\nsql = \"length(value) < 9\"\n", nil, false},
		{"the same pipeline from a folder", `name = "j"
pipeline = "pipelines/versioned_changes"
transform_version = 1
schema_version = 1
[input]
path = "in.jsonl"
`, folder, false},
		{"a model", "name = \"m\"\npipeline = \"select\"\n[input]\nupstream = [\"src\"]\n[transform]\nsql = \"models/m.sql\"\n[target]\nkey = [\"k\"]\n",
			map[string]string{"models/m.sql": "SELECT k, sum(x) AS s FROM {{upstream:src}} GROUP BY k\n"}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			j, msg := loadJobText(t, c.text, c.files)
			require.Empty(t, msg)
			require.Equal(t, c.want, j.ParallelSteps())
		})
	}
}
