package lint

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/idem-dev/idem/internal/job"

	"github.com/stretchr/testify/require"

	"github.com/idem-dev/idem/pipelines"
)

func lintSummary(rep *Report) []string {
	out := []string{}
	for _, f := range rep.Findings {
		out = append(out, fmt.Sprintf("%s %s %s:%d", f.ID, f.Severity, filepath.Base(f.File), f.Line))
	}
	return out
}

// TestLintFindsEachProblem: the fixture pipeline holds each problem once.
func TestLintFindsEachProblem(t *testing.T) {
	t.Parallel()
	rep, err := Check(context.Background(), "testdata/lint/bad.toml", pipelines.FS)
	require.NoError(t, err)
	require.Equal(t, []string{
		"L001 error pipeline.toml:0",
		"L005 warning pipeline.toml:0",
		"L006 error pipeline.toml:0",
		"L008 warning v1:0",
		"L003 error 01_stage.sql:8",
		"L002 warning 02_rank.sql:6",
		"L004 warning 02_rank.sql:7",
		"L003 error 02_rank.sql:8",
		"L004 warning 04_commit.sql:3",
		"L004 error 04_commit.sql:6",
		"L010 error 04_commit.sql:6",
	}, lintSummary(rep))
	require.Equal(t, 6, rep.Errors)
	require.Equal(t, 5, rep.Warnings)
	for _, f := range rep.Findings {
		require.NotEmpty(t, f.Fix, f.ID)
		require.NotEmpty(t, f.Message, f.ID)
	}
	require.Contains(t, rep.Findings[1].Message, "param unused")
	require.Contains(t, rep.Findings[2].Message, "no step stores rows in lint_bad_results")
	require.Contains(t, rep.Findings[3].Message, "idem_touched")
	require.Contains(t, rep.Findings[4].Message, "now()")
	require.Contains(t, rep.Findings[6].Message, "string_agg()")
	require.Contains(t, rep.Findings[7].Message, "random()")
}

// TestLintJobWithoutKey: a merge_by_key job without key columns is finding
// L001, not a load error.
func TestLintJobWithoutKey(t *testing.T) {
	t.Parallel()
	rep, err := Check(context.Background(), "testdata/lint/nokey.toml", pipelines.FS)
	require.NoError(t, err)
	require.Equal(t, []string{"L001 error nokey.toml:10"}, lintSummary(rep))
}

// TestLintSilentOnBuiltins: every example job, those of the project
// folders under configs/ too, and so every built-in pipeline (select
// included), lints clean.
func TestLintSilentOnBuiltins(t *testing.T) {
	t.Parallel()
	jobs, err := filepath.Glob("../../configs/*.toml")
	require.NoError(t, err)
	inFolders, err := filepath.Glob("../../configs/*/*.toml")
	require.NoError(t, err)
	require.NotEmpty(t, inFolders)
	jobs = append(jobs, inFolders...)
	require.GreaterOrEqual(t, len(jobs), 3)
	seen := map[string]bool{}
	for _, j := range jobs {
		rep, err := Check(context.Background(), j, pipelines.FS)
		require.NoError(t, err, j)
		require.Empty(t, rep.Findings, j)
		seen[rep.Pipeline] = true
	}
	for _, name := range job.BuiltinNames(pipelines.FS) {
		require.True(t, seen[name], "no example job lints built-in pipeline %s", name)
	}
}

// tinyPipeline writes a refresh pipeline folder (key id) whose steps are
// the given files, and a job that runs it, and returns the job's path.
func tinyPipeline(t *testing.T, dir, mode string, steps map[string]string) string {
	t.Helper()
	p := filepath.Join(dir, "tiny")
	require.NoError(t, os.MkdirAll(filepath.Join(p, "transform", "v1"), 0o755))
	require.NoError(t, os.MkdirAll(filepath.Join(p, "schema"), 0o755))
	write := func(name, text string) {
		require.NoError(t, os.WriteFile(filepath.Join(p, name), []byte(text), 0o644))
	}
	write("pipeline.toml", `name = "tiny"
mode = "`+mode+`"
description = "fixture for the step contract"
key = ["id"]
columns = [
  { name = "id", type = "BIGINT" },
  { name = "value", type = "VARCHAR" },
]
`)
	write("schema/v1.sql", "CREATE OR REPLACE TABLE {{table}} (id BIGINT, value VARCHAR);\n")
	for name, text := range steps {
		write(filepath.Join("transform", "v1", name), text)
	}
	j := filepath.Join(dir, "tiny.toml")
	require.NoError(t, os.WriteFile(j, []byte(`name = "tiny"
pipeline = "./tiny"
transform_version = 1
schema_version = 1
[input]
format = "csv"
`), 0o644))
	return j
}

const (
	tinyStage = `CREATE OR REPLACE TEMP TABLE staged AS
SELECT row_number() OVER () AS _row, TRY_CAST(id AS BIGINT) AS id, value,
       CASE WHEN TRY_CAST(id AS BIGINT) IS NULL THEN 'invalid_id' END AS reason
FROM input;
`
	tinyOutcomes = `CREATE OR REPLACE TEMP TABLE outcomes AS
SELECT _row, id, value, coalesce(reason, 'accepted') AS outcome FROM staged;
`
	tinyCommit = `DELETE FROM {{table}};
INSERT INTO {{table}} SELECT id, value FROM outcomes WHERE outcome = 'accepted' ORDER BY id, _row;
`
)

// TestLintStepContractAndLimit: lint finds a stage step that does not
// create staged (or without reason), no outcomes relation, an apply
// pipeline without idem_touched (L008), and a LIMIT whose rows depend on
// arrival order (L007); a total order, EXISTS and LIMIT 0 are silent.
func TestLintStepContractAndLimit(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, mode string
		steps      map[string]string
		want       []string
		message    string
	}{
		{"clean", "refresh", map[string]string{"01_stage.sql": tinyStage, "02_outcomes.sql": tinyOutcomes, "03_commit.sql": tinyCommit}, []string{}, ""},
		{"no staged", "refresh", map[string]string{"01_stage.sql": strings.Replace(tinyStage, "staged", "stage_rows", 1), "02_outcomes.sql": tinyOutcomes, "03_commit.sql": tinyCommit},
			[]string{"L008 error 01_stage.sql:0"}, "the stage step 01_stage.sql does not create temp table staged"},
		{"staged later", "refresh", map[string]string{"01_stage.sql": "CREATE TEMP TABLE early AS SELECT 1 AS x;\n", "02_outcomes.sql": tinyStage + tinyOutcomes, "03_commit.sql": tinyCommit},
			[]string{"L008 error 01_stage.sql:0"}, "staged is created by 02_outcomes.sql, not by the stage step 01_stage.sql"},
		{"commented staged", "refresh", map[string]string{"01_stage.sql": "-- CREATE TEMP TABLE staged AS ...\nCREATE TEMP TABLE early AS SELECT 1 AS x;\n", "02_outcomes.sql": tinyOutcomes, "03_commit.sql": tinyCommit},
			[]string{"L008 error 01_stage.sql:0"}, "does not create temp table staged"},
		{"no reason", "refresh", map[string]string{"01_stage.sql": strings.Replace(tinyStage, "AS reason", "AS why", 1), "02_outcomes.sql": strings.Replace(tinyOutcomes, "reason", "why", 1), "03_commit.sql": tinyCommit},
			[]string{"L008 error 01_stage.sql:0"}, "creates staged without a column reason"},
		{"no outcomes", "refresh", map[string]string{"01_stage.sql": tinyStage, "02_outcomes.sql": strings.Replace(tinyOutcomes, "TABLE outcomes", "TABLE results", 1), "03_commit.sql": strings.ReplaceAll(tinyCommit, "outcomes", "results")},
			[]string{"L008 error v1:0"}, "no step creates temp table outcomes"},
		{"apply without touched", "apply", map[string]string{"01_stage.sql": tinyStage, "02_outcomes.sql": tinyOutcomes, "03_commit.sql": tinyCommit},
			[]string{"L008 warning v1:0"}, "no step creates temp table idem_touched"},
		{"apply with touched", "apply", map[string]string{"01_stage.sql": tinyStage, "02_outcomes.sql": tinyOutcomes, "03_commit.sql": tinyCommit + "CREATE OR REPLACE TEMP TABLE idem_touched AS SELECT id FROM outcomes;\n"}, []string{}, ""},
		{"limit unordered", "refresh", map[string]string{"01_stage.sql": tinyStage, "02_outcomes.sql": tinyOutcomes, "03_commit.sql": "DELETE FROM {{table}};\nINSERT INTO {{table}}\nWITH firsts AS (SELECT id, value FROM outcomes\n  LIMIT 10)\nSELECT * FROM firsts ORDER BY id;\n"},
			[]string{"L007 warning 03_commit.sql:4"}, "LIMIT/OFFSET without ORDER BY keeps whichever rows arrive first"},
		{"limit not total", "refresh", map[string]string{"01_stage.sql": tinyStage, "02_outcomes.sql": tinyOutcomes, "03_commit.sql": "DELETE FROM {{table}};\nINSERT INTO {{table}} SELECT id, value FROM outcomes ORDER BY value LIMIT 10;\n"},
			[]string{"L007 warning 03_commit.sql:2"}, "with an ORDER BY that is not total"},
		{"offset in subquery", "refresh", map[string]string{"01_stage.sql": tinyStage, "02_outcomes.sql": tinyOutcomes, "03_commit.sql": "DELETE FROM {{table}};\nINSERT INTO {{table}} SELECT id, value FROM (SELECT * FROM outcomes OFFSET 5) ORDER BY id, _row;\n"},
			[]string{"L007 warning 03_commit.sql:2"}, "LIMIT/OFFSET without ORDER BY"},
		{"limit total", "refresh", map[string]string{"01_stage.sql": tinyStage, "02_outcomes.sql": tinyOutcomes, "03_commit.sql": "DELETE FROM {{table}};\nINSERT INTO {{table}} SELECT id, value FROM outcomes WHERE EXISTS (SELECT 1 FROM staged LIMIT 1) ORDER BY value, _row LIMIT 10;\nINSERT INTO {{table}} SELECT id, value FROM outcomes ORDER BY id LIMIT 0;\n"}, []string{}, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			j := tinyPipeline(t, t.TempDir(), c.mode, c.steps)
			rep, err := Check(context.Background(), j, pipelines.FS)
			require.NoError(t, err)
			require.Equal(t, c.want, lintSummary(rep))
			if c.message != "" {
				require.Contains(t, rep.Findings[0].Message, c.message)
				require.NotEmpty(t, rep.Findings[0].Fix)
			}
		})
	}
}

// tinyModel writes a model job (pipeline = "select") reading upstream job
// src, whose v1.sql is model, and returns the job's path.
func tinyModel(t *testing.T, dir, model string) string {
	t.Helper()
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "models", "daily"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "models", "daily", "v1.sql"), []byte(model), 0o644))
	j := filepath.Join(dir, "daily.toml")
	require.NoError(t, os.WriteFile(j, []byte(`name = "daily"
pipeline = "select"
transform_version = 1
[input]
upstream = ["src"]
[transform]
sql = "models/daily"
[target]
key = ["day"]
`), 0o644))
	return j
}

// TestLintModelsAndUndeclaredReads: a model is linted in its own file,
// not held to the step contract (L008), and a step or model that reads a
// table of the database other than its own or a declared upstream is
// L009, naming the table and the fix at the line that names it; CTEs, idem's relations, the target
// and the tables a step creates are not.
func TestLintModelsAndUndeclaredReads(t *testing.T) {
	t.Parallel()
	models := []struct {
		name, model string
		want        []string
		message     string
	}{
		{"clean", "SELECT day, count(*) AS n\nFROM {{upstream:src}}\nGROUP BY day\n", []string{}, ""},
		{"cte", "WITH d AS (SELECT day FROM {{upstream:src}})\nSELECT day, count(*) AS n FROM d GROUP BY day;\n", []string{}, ""},
		{"reads zones", "-- per day\nSELECT s.day, count(*) AS n\nFROM {{upstream:src}} AS s\nJOIN zones AS z ON z.id = s.zone\nGROUP BY s.day\n",
			[]string{"L009 error v1.sql:4"}, "v1.sql reads table zones, which is not a declared upstream"},
		{"reads main.zones in a subquery", "SELECT day, count(*) AS n FROM {{upstream:src}}\nWHERE zone IN (SELECT id FROM main.zones)\nGROUP BY day\n",
			[]string{"L009 error v1.sql:2"}, "reads table main.zones"},
		{"nondeterministic", "SELECT day, count(*) AS n, now() AS at\nFROM {{upstream:src}}\nGROUP BY day\n",
			[]string{"L003 error v1.sql:1"}, "now()"},
	}
	for _, c := range models {
		t.Run("model "+c.name, func(t *testing.T) {
			t.Parallel()
			rep, err := Check(context.Background(), tinyModel(t, t.TempDir(), c.model), pipelines.FS)
			require.NoError(t, err)
			require.Equal(t, "select", rep.Pipeline)
			require.Equal(t, c.want, lintSummary(rep))
			for _, f := range rep.Findings {
				require.True(t, strings.HasSuffix(f.File, "models/daily/v1.sql"), f.File)
			}
			if c.message != "" {
				require.Contains(t, rep.Findings[0].Message, c.message)
			}
			if len(c.want) > 0 && c.want[0][:4] == UndeclaredRead {
				require.Equal(t, "declare it in [input] upstream and read it as {{upstream:zones}}", rep.Findings[0].Fix)
			}
		})
	}
	steps := []struct {
		name   string
		commit string
		want   []string
	}{
		{"own tables", tinyCommit + "CREATE OR REPLACE TEMP TABLE kept AS SELECT * FROM {{table}};\nINSERT INTO {{table}} SELECT * FROM kept ORDER BY id;\n", []string{}},
		{"reads another table", "DELETE FROM {{table}};\nINSERT INTO {{table}}\nSELECT o.id, p.value FROM outcomes o JOIN prices p USING (id) ORDER BY o.id;\n", []string{"L009 error 03_commit.sql:3"}},
	}
	for _, c := range steps {
		t.Run("step "+c.name, func(t *testing.T) {
			t.Parallel()
			j := tinyPipeline(t, t.TempDir(), "refresh", map[string]string{"01_stage.sql": tinyStage, "02_outcomes.sql": tinyOutcomes, "03_commit.sql": c.commit})
			rep, err := Check(context.Background(), j, pipelines.FS)
			require.NoError(t, err)
			require.Equal(t, c.want, lintSummary(rep))
			if len(c.want) > 0 {
				require.Contains(t, rep.Findings[0].Message, "03_commit.sql reads table prices, which is not a declared upstream")
			}
		})
	}
}

// TestLintStream: a stream job whose pipeline has no key is STREAM-001 (an
// error, beside L001), and a max_wait under 100 ms is STREAM-002 (a
// warning); a stream job with a key and the default max_wait is clean.
func TestLintStream(t *testing.T) {
	t.Parallel()
	cases := []struct {
		file string
		want []string
	}{
		{"testdata/lint/stream_nokey.toml", []string{"L001 error stream_nokey.toml:15", "STREAM-001 error stream_nokey.toml:7"}},
		{"testdata/lint/stream_fastpoll.toml", []string{"STREAM-002 warning stream_fastpoll.toml:10"}},
		{"../../configs/rides.toml", []string{}},
	}
	for _, tc := range cases {
		t.Run(filepath.Base(tc.file), func(t *testing.T) {
			rep, err := Check(context.Background(), tc.file, pipelines.FS)
			require.NoError(t, err)
			require.Equal(t, tc.want, lintSummary(rep))
			for _, f := range rep.Findings {
				if strings.HasPrefix(f.ID, "STREAM") {
					require.NotEmpty(t, f.Fix)
					require.Contains(t, f.Message, map[string]string{"STREAM-001": "would double rows", "STREAM-002": "always-on cost"}[f.ID])
				}
			}
		})
	}
}
