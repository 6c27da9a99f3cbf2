package job_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idem-dev/idem/internal/job"
	"github.com/idem-dev/idem/internal/report"
	"github.com/idem-dev/idem/pipelines"
)

// TestPipelineFilesStayInside: a pipeline or model folder inside the job
// file's folder cannot reach files outside it through symbolic links in it:
// a step file, a transform folder, pipeline.toml, a schema file or a
// model's vN.sql that leads outside is refused at load (exit 2), naming
// the file and where it leads. A link that stays inside is followed.
func TestPipelineFilesStayInside(t *testing.T) {
	t.Parallel()
	const pipeline = "name = \"p\"\nmode = \"refresh\"\nkey = [\"id\"]\ncolumns = [{ name = \"id\", type = \"BIGINT\" }]\n"
	const schema = "CREATE TABLE IF NOT EXISTS {{table}} (id BIGINT);\n"
	const step = "CREATE OR REPLACE TEMP TABLE staged AS SELECT *, NULL AS reason FROM input;\nCREATE OR REPLACE TEMP TABLE outcomes AS SELECT 'accepted' AS outcome FROM staged;\nDELETE FROM {{table}}; INSERT INTO {{table}} SELECT id FROM staged;\n"
	const jobText = "name = \"j\"\npipeline = \"p\"\ntransform_version = 1\nschema_version = 1\n[target]\ntable = \"t\"\n"
	const modelJob = "name = \"m\"\npipeline = \"select\"\ntransform_version = 1\n[input]\nupstream = [\"u\"]\n[transform]\nsql = \"models/m\"\n[target]\nkey = [\"k\"]\n"
	for _, tc := range []struct {
		name string
		job  string
		// files are written under the job's folder, links made from it
		// (to a path under outside when it starts with "OUT/").
		files map[string]string
		links map[string]string
		want  string // "" for loaded
	}{
		{"a step file", jobText,
			map[string]string{"p/pipeline.toml": pipeline, "p/schema/v1.sql": schema, "OUT/evil.sql": step},
			map[string]string{"p/transform/v1/01_a.sql": "OUT/evil.sql"},
			"transform/v1/01_a.sql: a symbolic link to OUT/evil.sql, outside folder"},
		{"a transform folder", jobText,
			map[string]string{"p/pipeline.toml": pipeline, "p/schema/v1.sql": schema, "OUT/v1/01_a.sql": step},
			map[string]string{"p/transform/v1": "OUT/v1"},
			"transform/v1: a symbolic link to OUT/v1, outside folder"},
		{"pipeline.toml", jobText,
			map[string]string{"OUT/pipeline.toml": pipeline, "p/schema/v1.sql": schema, "p/transform/v1/01_a.sql": step},
			map[string]string{"p/pipeline.toml": "OUT/pipeline.toml"},
			"pipeline.toml: a symbolic link to OUT/pipeline.toml, outside folder"},
		{"a schema file", jobText,
			map[string]string{"p/pipeline.toml": pipeline, "OUT/v1.sql": schema, "p/transform/v1/01_a.sql": step},
			map[string]string{"p/schema/v1.sql": "OUT/v1.sql"},
			"schema/v1.sql: a symbolic link to OUT/v1.sql, outside folder"},
		{"a model file", modelJob,
			map[string]string{"OUT/v1.sql": "SELECT 1 AS k FROM {{upstream:u}}"},
			map[string]string{"models/m/v1.sql": "OUT/v1.sql"},
			"v1.sql: a symbolic link to OUT/v1.sql, outside folder"},
		{"a link that stays inside", jobText,
			map[string]string{"p/pipeline.toml": pipeline, "p/schema/v1.sql": schema, "p/shared/a.sql": step},
			map[string]string{"p/transform/v1/01_a.sql": "p/shared/a.sql"},
			""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			base := t.TempDir()
			dir, out := filepath.Join(base, "job"), filepath.Join(base, "outside")
			place := func(rel string) string {
				if r, ok := cutOut(rel); ok {
					return filepath.Join(out, r)
				}
				return filepath.Join(dir, rel)
			}
			for rel, text := range tc.files {
				p := place(rel)
				require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
				require.NoError(t, os.WriteFile(p, []byte(text), 0o644))
			}
			for rel, target := range tc.links {
				p := place(rel)
				require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
				require.NoError(t, os.Symlink(place(target), p))
			}
			path := filepath.Join(dir, "job.toml")
			require.NoError(t, os.WriteFile(path, []byte(tc.job), 0o644))
			j, err := job.LoadJob(path, pipelines.FS)
			if tc.want == "" {
				require.NoError(t, err)
				require.NotEmpty(t, j.Steps)
				return
			}
			require.Error(t, err)
			require.Equal(t, report.ExitUsage, report.ExitCode(err), "a job-file error: exit 2")
			require.Contains(t, err.Error(), strings.Replace(tc.want, "OUT/", out+"/", 1))
		})
	}
}

// cutOut is rel without its "OUT/" prefix, and whether it had it.
func cutOut(rel string) (string, bool) { return strings.CutPrefix(rel, "OUT/") }
