package job_test

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idem-dev/idem/internal/job"
	"github.com/idem-dev/idem/internal/pipeline"
	"github.com/idem-dev/idem/internal/report"
	"github.com/idem-dev/idem/pipelines"
)

const macroModel = "SELECT day, cents_to_dollars(amount) AS amount FROM {{upstream:trips}}"

// TestMacrosKey: a job uses the macros its SQL calls and those they call,
// each after the macros it calls; their text is part of the transform
// part of its key, so editing a macro changes the key of exactly the jobs
// that call it, and a job that calls none keeps its key byte for byte,
// macros folder or not.
func TestMacrosKey(t *testing.T) {
	t.Parallel()
	macros := map[string]string{
		"macros/cents_to_dollars.sql": "-- dbt's\ncreate macro cents_to_dollars(c, scale := 2) as round(to_dollars(c), scale);\n",
		"macros/to_dollars.sql":       "CREATE MACRO to_dollars(c) AS c / 100.0",
		"macros/unused.sql":           "CREATE OR REPLACE MACRO unused(x) AS TABLE SELECT x AS y",
		"macros/README.md":            "not a macro",
	}
	load := func(model string, extra map[string]string) *job.Job {
		t.Helper()
		files := map[string]string{"daily.toml": modelJob, "models/daily/v1.sql": model}
		for k, v := range extra {
			files[k] = v
		}
		j, err := job.LoadJob(filepath.Join(writeTree(t, files), "daily.toml"), pipelines.FS)
		require.NoError(t, err)
		return j
	}
	plain := load("SELECT day FROM {{upstream:trips}}", nil)
	require.Empty(t, plain.Macros)
	beside := load("SELECT day FROM {{upstream:trips}}", macros)
	require.Empty(t, beside.Macros, "a macro no SQL calls is not used")
	require.Equal(t, plain.TransformPart(), beside.TransformPart(), "a job that calls no macro keeps its key")
	require.Equal(t, pipeline.StepsDigest(plain.Steps), plain.TransformPart().SHA256)

	used := load(macroModel, macros)
	var names []string
	for _, m := range used.Macros {
		names = append(names, m.Name)
	}
	require.Equal(t, []string{"to_dollars", "cents_to_dollars"}, names, "a macro after those it calls")
	require.Equal(t, "macros/cents_to_dollars.sql", used.Macros[1].File)
	require.Equal(t, "CREATE OR REPLACE TEMP MACRO \"cents_to_dollars\"(c, scale := 2) as round(to_dollars(c), scale)", used.Macros[1].Create[1:])
	require.Equal(t, "\n", used.Macros[1].Create[:1], "on the line of the file's CREATE")

	edited := map[string]string{}
	for k, v := range macros {
		edited[k] = v
	}
	edited["macros/to_dollars.sql"] = "CREATE MACRO to_dollars(c) AS c / 100"
	again := load(macroModel, macros)
	changed := load(macroModel, edited)
	require.Equal(t, used.TransformPart(), again.TransformPart())
	require.NotEqual(t, used.TransformPart().SHA256, changed.TransformPart().SHA256, "a macro it calls through another changed")
	require.Equal(t, pipeline.StepsDigest(used.Steps), pipeline.StepsDigest(changed.Steps), "the released SQL is the steps': a macro edit is no edit of a released version")
	edited["macros/unused.sql"] = "CREATE MACRO unused(x) AS TABLE SELECT x AS z"
	require.Equal(t, changed.TransformPart(), load(macroModel, edited).TransformPart(), "a macro it does not call changed")

	// Another version of the model calls other macros.
	other, err := used.ModelWith("SELECT day FROM {{upstream:trips}}")
	require.NoError(t, err)
	require.Empty(t, other.Macros)
	require.Equal(t, plain.TransformPart(), other.TransformPart())
}

// TestMacroFileErrors: a macro file holds one CREATE MACRO named as the
// file, refused otherwise when the job loads, naming the file.
func TestMacroFileErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, file, text, want string }{
		{"not a macro", "m.sql", "SELECT 1", "a macro file holds one CREATE MACRO m(...) AS ..."},
		{"a table", "m.sql", "CREATE TABLE m (x INT)", "a macro file holds one CREATE MACRO"},
		{"another name", "m.sql", "CREATE MACRO n(x) AS x", "the file creates macro n: a macro file is named for its macro (n.sql)"},
		{"a qualified name", "m.sql", "CREATE MACRO main.m(x) AS x", "a macro file holds one CREATE MACRO"},
		{"a quoted name", "m.sql", `CREATE MACRO "m"(x) AS x`, "a macro file holds one CREATE MACRO"},
		{"a file name that is no name", "m-1.sql", "CREATE MACRO m(x) AS x", "macro file name m-1.sql is not a macro name"},
		{"idem's prefix", "idem_m.sql", "CREATE MACRO idem_m(x) AS x", "names starting with idem are reserved"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			d := writeTree(t, map[string]string{"daily.toml": modelJob, "models/daily/v1.sql": "SELECT day FROM {{upstream:trips}}", "macros/" + tc.file: tc.text})
			_, err := job.LoadJob(filepath.Join(d, "daily.toml"), pipelines.FS)
			var jfe *report.JobFileError
			require.ErrorAs(t, err, &jfe)
			require.Equal(t, filepath.Join(d, "macros", tc.file), jfe.File)
			require.ErrorContains(t, err, tc.want)
		})
	}
}
