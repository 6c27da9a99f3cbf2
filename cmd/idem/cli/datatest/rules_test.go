package datatest

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/idem-dev/idem/cmd/idem/cli/internal/clitest"
	"github.com/stretchr/testify/require"
)

// TestRuleRefusedAtLoad: a rule that depends on settings or would fail the
// run is refused when the job is loaded, by run, plan and lint alike: exit
// 2 naming the file, the rule's line, the rule and what is refused, and
// the database is left as it was.
func TestRuleRefusedAtLoad(t *testing.T) {
	t.Parallel()
	cases := []struct{ name, sql, want string }{
		{"threads", "current_setting('threads') = '2'", "rule threads: a rule may not call current_setting(): it reads a setting, a variable or the environment, not the row"},
		{"star", "COLUMNS('.*') IS NOT NULL", "rule star: a rule may not hold * or COLUMNS(...): it names the columns it checks"},
		{"raise", "error('x') IS NULL", "rule raise: a rule may not call error(): it would fail the run; a rule fails rows"},
		{"cast", "CAST(value AS INTEGER) > 0", "rule cast: a rule may not CAST a column to INTEGER: a value that does not convert would fail the whole run; use TRY_CAST (NULL fails the rule)"},
		{"wrong_type", "version + 'x' > 0", "rule wrong_type: Conversion Error: Could not convert string 'x' to INT"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			j := clitest.AppliedGuardJob(t)
			before := clitest.CaptureState(t, j.DB)
			text, err := os.ReadFile(j.File)
			require.NoError(t, err)
			line := strings.Count(string(text), "\n") + 2
			clitest.WriteText(t, j.File, string(text)+"\n[[quality.rules]]\nname = \""+c.name+"\"\nsql = "+strconv.Quote(c.sql)+"\n")
			for _, cmd := range [][]string{{"run", j.File}, {"plan", j.File}, {"lint", j.File}} {
				r := clitest.CallIdem(t, cmd...)
				require.Equal(t, 2, r.Code, "%v: %s %s", cmd, r.Stdout, r.Stderr)
				require.Contains(t, r.Stderr, fmt.Sprintf("%s:%d: quality.rules[1]: %s", j.File, line, c.want), cmd)
			}
			require.Equal(t, before, clitest.CaptureState(t, j.DB))
		})
	}
}

// TestRulesSameOutcomesAnyThreads: every kind of rule a job may declare
// gives each row the same outcome under --threads 1 and --threads 2.
func TestRulesSameOutcomesAnyThreads(t *testing.T) {
	t.Parallel()
	rules := [][2]string{
		{"trimmed", "length(trim(value)) <= 5 OR value IS NULL"},
		{"like", "entity_id NOT LIKE 'test-%' AND entity_id NOT ILIKE 'TMP%'"},
		{"regexp", "regexp_full_match(coalesce(value, ''), '[a-z0-9]*')"},
		{"try_cast", "TRY_CAST(value AS INTEGER) IS NULL OR TRY_CAST(value AS INTEGER) < 100"},
		{"case", "CASE WHEN operation = 'delete' THEN value IS NULL ELSE value IS NOT NULL END"},
		{"between", "version BETWEEN 1 AND 1000"},
		{"in_list", "version % 10 NOT IN (7, 8)"},
		{"math", "abs(version - 500) >= 1 AND round(sqrt(version), 2) > 0"},
		{"dates", "make_date(2020, 1, 1) + TRY_CAST(version AS INTEGER) < DATE '2021-01-01'"},
		{"strings", "md5(entity_id) <> '' AND concat_ws('-', entity_id, change_id) NOT LIKE '%--%'"},
	}
	dir := t.TempDir()
	var b strings.Builder
	fmt.Fprintf(&b, "name = \"ruled\"\npipeline = \"versioned_changes\"\ntransform_version = 1\nschema_version = 1\n\n[input]\nformat = \"jsonl\"\n")
	for _, r := range rules {
		fmt.Fprintf(&b, "\n[[quality.rules]]\nname = %q\nsql = %q\n", r[0], r[1])
	}
	job := filepath.Join(dir, "job.toml")
	clitest.WriteFile(t, job, b.String())
	var in strings.Builder
	values := []string{"ok", "toolongvalue", "UP", "150", "x7", ""}
	for i := 0; i < 600; i++ {
		entity := fmt.Sprintf("e%d", i%50)
		switch i % 13 {
		case 3:
			entity = "test-" + entity
		case 5:
			entity = "tmp" + entity
		}
		op, value := "upsert", strconv.Quote(values[i%len(values)])
		if i%11 == 0 {
			op, value = "delete", "null"
		}
		fmt.Fprintf(&in, `{"change_id":"c%d","entity_id":%q,"source_version":%d,"operation":%q,"value":%s}`+"\n", i, entity, 1+(i*37)%520, op, value)
	}
	input := filepath.Join(dir, "in.jsonl")
	clitest.WriteFile(t, input, in.String())
	outcomes := map[string][]string{}
	for _, threads := range []string{"1", "2"} {
		db := filepath.Join(dir, "t"+threads+".duckdb")
		code, _, errOut := clitest.InProcess(t, "run", job, "--input", input, "--db", db, "--threads", threads)
		require.Equal(t, 0, code, errOut)
		outcomes[threads] = clitest.QueryStrs(t, db, `SELECT change_id || ' ' || outcome FROM ruled_outcomes ORDER BY change_id`)
	}
	require.Len(t, outcomes["1"], 600)
	require.Equal(t, outcomes["1"], outcomes["2"])
	// The input makes most rules fail somewhere, so the comparison covers
	// what they decide, not only rows they all accept.
	failed := map[string]bool{}
	for _, o := range outcomes["1"] {
		if out := strings.SplitN(o, " ", 2)[1]; strings.HasPrefix(out, "invalid_rule:") {
			failed[out] = true
		}
	}
	require.GreaterOrEqual(t, len(failed), 6, "%v", failed)
}

// contractPipeline writes a refresh pipeline folder with the given steps
// as transform version (the valid ones when steps is nil) and a job that
// runs that version with its own database, and returns the job's path and
// the database's.
func contractPipeline(t *testing.T, dir string, version int, steps map[string]string, rules string) (string, string) {
	t.Helper()
	if steps == nil {
		steps = map[string]string{
			"01_stage.sql":    "CREATE OR REPLACE TEMP TABLE staged AS\nSELECT row_number() OVER () AS _row, TRY_CAST(id AS BIGINT) AS id, value,\n  CASE WHEN TRY_CAST(id AS BIGINT) IS NULL THEN 'invalid_id' END AS reason\nFROM input;\n",
			"02_outcomes.sql": "CREATE OR REPLACE TEMP TABLE outcomes AS\nSELECT _row, id, value, coalesce(reason, 'accepted') AS outcome FROM staged;\n",
			"03_commit.sql":   "DELETE FROM {{table}};\nINSERT INTO {{table}} SELECT id, value FROM outcomes WHERE outcome = 'accepted' ORDER BY id, _row;\n",
		}
	}
	p := filepath.Join(dir, "tiny")
	clitest.WriteFile(t, filepath.Join(p, "pipeline.toml"), "name = \"tiny\"\nmode = \"refresh\"\ndescription = \"step contract fixture\"\nkey = [\"id\"]\ncolumns = [\n  { name = \"id\", type = \"BIGINT\" },\n  { name = \"value\", type = \"VARCHAR\" },\n]\n")
	clitest.WriteFile(t, filepath.Join(p, "schema", "v1.sql"), "CREATE OR REPLACE TABLE {{table}} (id BIGINT, value VARCHAR);\n")
	for name, text := range steps {
		clitest.WriteFile(t, filepath.Join(p, "transform", fmt.Sprintf("v%d", version), name), text)
	}
	db := filepath.Join(dir, "idem.duckdb")
	clitest.WriteFile(t, filepath.Join(dir, "in.csv"), "id,value\n1,a\n2,b\nx,c\n")
	job := filepath.Join(dir, "tiny.toml")
	clitest.WriteFile(t, job, fmt.Sprintf("name = \"tiny\"\npipeline = \"./tiny\"\ntransform_version = %d\nschema_version = 1\ndatabase = %q\n[input]\npath = %q\n%s", version, db, filepath.Join(dir, "in.csv"), rules))
	return job, db
}

// TestRunNamesTheStepThatBrokeTheContract: a transform whose stage step
// does not create staged, or whose steps create no outcomes, fails the run
// with exit 1 naming the step and the missing relation, and commits
// nothing; lint reports the same transform (L008, exit 1) before any run.
// A job with quality rules finds it when loaded (exit 2).
func TestRunNamesTheStepThatBrokeTheContract(t *testing.T) {
	t.Parallel()
	stageRows := "CREATE OR REPLACE TEMP TABLE stage_rows AS\nSELECT row_number() OVER () AS _row, TRY_CAST(id AS BIGINT) AS id, value, CAST(NULL AS VARCHAR) AS reason FROM input;\n"
	commit := "DELETE FROM {{table}};\nINSERT INTO {{table}} SELECT id, value FROM outcomes WHERE outcome = 'accepted' ORDER BY id, _row;\n"
	cases := []struct {
		name  string
		steps map[string]string
		rules string
		code  int
		want  string
	}{
		{"a later step reads staged", map[string]string{
			"01_stage.sql":    stageRows,
			"02_outcomes.sql": "CREATE OR REPLACE TEMP TABLE outcomes AS\nSELECT _row, id, value, 'accepted' AS outcome FROM staged;\n",
			"03_commit.sql":   commit,
		}, "", 1, "step 02_outcomes.sql: step 01_stage.sql did not create temp table staged (the stage step, the first, must create it: one row per input row, with a column reason); step 02_outcomes.sql reads it: Catalog Error: Table with name staged does not exist!"},
		{"quality rules read staged", map[string]string{
			"01_stage.sql":    stageRows,
			"02_outcomes.sql": "CREATE OR REPLACE TEMP TABLE outcomes AS\nSELECT _row, id, value, 'accepted' AS outcome FROM stage_rows;\n",
			"03_commit.sql":   commit,
		}, "[[quality.rules]]\nname = \"has_value\"\nsql = \"value IS NOT NULL\"\n", 2, "tiny.toml:8: quality.rules[1]: quality rules need the stage step (01_stage.sql) to build temp table staged with a reason column: the step left no table staged"},
		{"no step reads staged", map[string]string{
			"01_stage.sql":    stageRows,
			"02_outcomes.sql": "CREATE OR REPLACE TEMP TABLE outcomes AS\nSELECT _row, id, value, 'accepted' AS outcome FROM stage_rows;\n",
			"03_commit.sql":   commit,
		}, "", 1, "pipeline tiny: count staged rows: step 01_stage.sql did not create temp table staged (the stage step, the first, must create it: one row per input row, with a column reason); idem's outcome check reads it: Catalog Error: Table with name staged does not exist!"},
		{"no outcomes", map[string]string{
			"02_outcomes.sql": "CREATE OR REPLACE TEMP TABLE results AS\nSELECT _row, id, value, coalesce(reason, 'accepted') AS outcome FROM staged;\n",
			"03_commit.sql":   strings.ReplaceAll(commit, "outcomes", "results"),
		}, "", 1, "pipeline tiny: no step before idem's outcome check created temp table outcomes (the outcomes step must create it: one row per staged row, with a column outcome): count outcomes in the outcomes relation: Catalog Error: Table with name outcomes does not exist!"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			job, db := contractPipeline(t, dir, 1, nil, c.rules)
			code, _, errOut := clitest.InProcess(t, "run", job)
			require.Equal(t, 0, code, errOut)
			before := clitest.CaptureState(t, db)
			if _, ok := c.steps["01_stage.sql"]; !ok {
				c.steps["01_stage.sql"] = "CREATE OR REPLACE TEMP TABLE staged AS\nSELECT row_number() OVER () AS _row, TRY_CAST(id AS BIGINT) AS id, value, CAST(NULL AS VARCHAR) AS reason FROM input;\n"
			}
			contractPipeline(t, dir, 2, c.steps, c.rules)
			code, out, errOut := clitest.InProcess(t, "lint", job)
			if c.code == 1 {
				require.Equal(t, 1, code, errOut)
				require.Contains(t, out, "L008")
			}
			code, _, errOut = clitest.InProcess(t, "run", job)
			require.Equal(t, c.code, code, errOut)
			require.Contains(t, errOut, c.want)
			require.Equal(t, before, clitest.CaptureState(t, db), "a failed run changed the database")
		})
	}
}
