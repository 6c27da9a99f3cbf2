package job_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idem-dev/idem/internal/job"
	"github.com/idem-dev/idem/internal/sqltext"
	"github.com/idem-dev/idem/pipelines"
)

const reservedFix = "a bare name in the steps would mean that temp relation, not the target: choose another [target] table"

// TestReservedTableNames: a target named like a temp relation of the run
// (input, staged, outcomes) or of its steps is refused at load, without
// case, naming the file, the line and the key; a job name that is the
// target's name is refused under key name.
func TestReservedTableNames(t *testing.T) {
	t.Parallel()
	head := func(pipeline, name string) string {
		return fmt.Sprintf("name = %q\npipeline = %q\ntransform_version = 1\nschema_version = 1\n", name, pipeline)
	}
	const runOwn = "is reserved: every run has temp relations input, staged and outcomes; " + reservedFix
	cases := []struct {
		name, text string
		files      map[string]string
		want       string
	}{
		{"staged", head("sample", "s") + "[target]\ntable = \"staged\"\n", nil, `job.toml:6: target.table: table "staged" ` + runOwn},
		{"outcomes", head("versioned_changes", "s") + "[target]\ntable = \"outcomes\"\n", nil, `job.toml:6: target.table: table "outcomes" ` + runOwn},
		{"input", head("orders", "s") + "[target]\ntable = \"input\"\n", nil, `job.toml:6: target.table: table "input" ` + runOwn},
		{"without case", head("sample", "s") + "[target]\ntable = \"StAgEd\"\n", nil, `job.toml:6: target.table: table "StAgEd" ` + runOwn},
		{"job name as the table", head("sample", "Outcomes"), nil, `job.toml:1: name: table "Outcomes" ` + runOwn},
		{"a step's temp table", head("sample", "s") + "[target]\ntable = \"ranked\"\n", nil,
			`job.toml:6: target.table: table "ranked" is reserved: step 02_rank.sql of pipeline sample creates a temp relation ranked; ` + reservedFix},
		{"a step's temp table as the job name", head("orders", "Candidates"), nil,
			`job.toml:1: name: table "Candidates" is reserved: step 02_rank.sql of pipeline orders creates a temp relation candidates; ` + reservedFix},
		{"a model", "name = \"staged\"\npipeline = \"select\"\ntransform_version = 1\n[input]\nupstream = [\"u\"]\n[transform]\nsql = \"m\"\n[target]\nkey = [\"k\"]\n",
			map[string]string{"m/v1.sql": "SELECT 1 AS k FROM {{upstream:u}}"}, `job.toml:1: name: table "staged" ` + runOwn},
		{"a companion", head("p", "s") + "[target]\ntable = \"t\"\n", map[string]string{
			"p/pipeline.toml":         "name = \"p\"\nmode = \"refresh\"\nkey = [\"id\"]\ncolumns = [{ name = \"id\", type = \"BIGINT\" }]\n",
			"p/schema/v1.sql":         "CREATE TABLE IF NOT EXISTS {{table}} (id BIGINT);\n",
			"p/transform/v1/01_a.sql": "CREATE OR REPLACE TEMP TABLE staged AS SELECT *, NULL AS reason FROM input;\nCREATE OR REPLACE TEMP VIEW \"T_Prev\" AS SELECT * FROM {{table}};\n",
			"p/transform/v1/02_b.sql": "CREATE OR REPLACE TEMP TABLE outcomes AS SELECT 'accepted' AS outcome FROM staged;\nINSERT INTO {{table:_prev}} SELECT id FROM staged;\n",
			"p/transform/v1/03_c.sql": "-- CREATE TEMP TABLE t AS SELECT 1; (a comment creates nothing)\nSELECT 'CREATE TEMP TABLE t';\n",
			"p/transform/v1/04_d.sql": "DELETE FROM {{table}}; INSERT INTO {{table}} SELECT id FROM staged;\n",
		}, `job.toml:6: target.table: table "t", whose companion {{table:_prev}} is "t_prev", is reserved: step 01_a.sql of pipeline p creates a temp relation t_prev; ` + reservedFix},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			_, got := loadJobText(t, c.text, c.files)
			require.Equal(t, c.want, got)
		})
	}

	t.Run("not reserved", func(t *testing.T) {
		t.Parallel()
		// A comment or a string that reads like CREATE TEMP creates
		// nothing; a name a pipeline does not use is free.
		for _, c := range []struct{ pipeline, table string }{{"versioned_changes", "ranked"}, {"sample", "candidates"}, {"sample", "staged_x"}, {"orders", "writes"}} {
			_, got := loadJobText(t, head(c.pipeline, "s")+fmt.Sprintf("[target]\ntable = %q\n", c.table), nil)
			require.Empty(t, got, "%s of %s", c.table, c.pipeline)
		}
	})
}

// TestReservedBuiltinTemps: for every built-in pipeline, every temp
// relation its steps create is refused as a target.
func TestReservedBuiltinTemps(t *testing.T) {
	t.Parallel()
	refused := 0
	for _, pipeline := range job.BuiltinNames(pipelines.FS) {
		if pipeline == "select" || pipeline == "merge_by_key" {
			continue // a model and a generic pipeline need more keys; cases above and below
		}
		dir := writeTree(t, map[string]string{"job.toml": fmt.Sprintf("name = \"s\"\npipeline = %q\ntransform_version = 1\nschema_version = 1\n", pipeline)})
		j, err := job.LoadJob(dir+"/job.toml", pipelines.FS)
		require.NoError(t, err)
		for _, s := range j.Steps {
			for _, name := range sqltext.CreatedRelations(s.SQL) {
				if strings.HasPrefix(name, "idem") {
					continue // refused for any job: names starting with idem
				}
				text := fmt.Sprintf("name = \"s\"\npipeline = %q\ntransform_version = 1\nschema_version = 1\n[target]\ntable = %q\n", pipeline, strings.ToUpper(name))
				_, got := loadJobText(t, text, nil)
				require.Contains(t, got, "job.toml:6: target.table: table ", "%s: %s", pipeline, name)
				require.Contains(t, got, " is reserved: ", "%s: %s", pipeline, name)
				refused++
			}
		}
	}
	require.GreaterOrEqual(t, refused, 10)

	merge := "name = \"m\"\npipeline = \"merge_by_key\"\ntransform_version = 2\nschema_version = 1\n[input.columns]\nid = \"BIGINT\"\nv = \"VARCHAR\"\n[target]\nkey = [\"id\"]\ntable = \"Writes\"\n"
	_, got := loadJobText(t, merge, nil)
	require.Equal(t, `job.toml:10: target.table: table "Writes" is reserved: step 04_commit.sql of pipeline merge_by_key creates a temp relation writes; `+reservedFix, got)
}
