package job_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idem-dev/idem/internal/job"
	"github.com/idem-dev/idem/internal/jobkey"
	"github.com/idem-dev/idem/internal/report"
	"github.com/idem-dev/idem/pipelines"
)

// writeTree writes files (path → text) under a new temporary folder.
func writeTree(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for p, text := range files {
		full := filepath.Join(dir, p)
		require.NoError(t, os.MkdirAll(filepath.Dir(full), 0o755))
		require.NoError(t, os.WriteFile(full, []byte(text), 0o644))
	}
	return dir
}

const modelJob = `name = "daily"
pipeline = "select"
transform_version = 1
database = "data/x.duckdb"

[input]
upstream = ["trips"]

[transform]
sql = "models/daily"

[target]
key = ["day"]
`

func TestModelJob(t *testing.T) {
	dir := writeTree(t, map[string]string{
		"daily.toml":          modelJob,
		"models/daily/v1.sql": "-- per day\nSELECT day, count(*) AS n FROM {{upstream:trips}} GROUP BY day; \n",
	})
	j, err := job.LoadJob(filepath.Join(dir, "daily.toml"), pipelines.FS)
	require.NoError(t, err)
	require.True(t, j.IsModel())
	require.Equal(t, []string{"trips"}, j.Input.Upstream)
	require.Equal(t, []string{"day"}, j.Key)
	require.Equal(t, "select:daily", j.ReleaseName())
	require.Equal(t, "models/daily/v2.sql", j.NextVersionHint())
	require.Len(t, j.Steps, 1)
	expanded := j.Expand(j.Steps[0].SQL)
	require.Contains(t, expanded, `FROM temp."idem_upstream_trips" GROUP BY day`)
	require.Contains(t, expanded, `ORDER BY "day"`)
	require.NotContains(t, expanded, "{{")
	require.NotContains(t, expanded, "GROUP BY day;") // the trailing semicolon is dropped
	require.Equal(t, 0, j.SchemaVersion)

	// The transform part covers the model's text.
	before := j.TransformPart()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "models/daily/v1.sql"), []byte("SELECT day, count(*) AS n, 1 AS x FROM {{upstream:trips}} GROUP BY day"), 0o644))
	j2, err := job.LoadJob(filepath.Join(dir, "daily.toml"), pipelines.FS)
	require.NoError(t, err)
	require.NotEqual(t, before.SHA256, j2.TransformPart().SHA256)
	require.Equal(t, before.Pipeline, j2.TransformPart().Pipeline)

	// An upstream is part of the key's input part; advancing it changes
	// the input part.
	p1 := jobkey.Parts{Upstream: []jobkey.UpstreamRef{{Job: "trips", Snapshot: 4, JobKey: "a"}}}
	p2 := jobkey.Parts{Upstream: []jobkey.UpstreamRef{{Job: "trips", Snapshot: 5, JobKey: "b"}}}
	require.Equal(t, []string{jobkey.PartInput}, p2.Changed(p1))
	require.NotEqual(t, p1.Key(), p2.Key())
	// A job without upstreams keeps the key it had (no "upstream" field).
	require.NotContains(t, jobkey.Parts{Input: "x"}.JSON(), "upstream")
}

// TestModelFile: a model written as one file has no transform_version: its
// version is its text's sha256 (transform part version 0), so an edit in
// place is a new version, and ModelWith rebuilds it from a kept text.
func TestModelFile(t *testing.T) {
	t.Parallel()
	fileJob := strings.Replace(strings.Replace(modelJob, "transform_version = 1\n", "", 1), `sql = "models/daily"`, `sql = "models/daily.sql"`, 1)
	v1 := "SELECT day, count(*) AS n FROM {{upstream:trips}} GROUP BY day"
	dir := writeTree(t, map[string]string{"daily.toml": fileJob, "models/daily.sql": v1})
	j, err := job.LoadJob(filepath.Join(dir, "daily.toml"), pipelines.FS)
	require.NoError(t, err)
	require.True(t, j.ContentVersioned())
	part := j.TransformPart()
	require.Equal(t, 0, part.Version)
	require.Equal(t, filepath.Join(dir, "models", "daily.sql"), j.ModelFile)
	_, err = j.ModelAt(1)
	require.ErrorContains(t, err, "versioned by its text's sha256, not numbered")

	// Editing the file is a new version; the kept text rebuilds the old.
	require.NoError(t, os.WriteFile(filepath.Join(dir, "models/daily.sql"), []byte(v1+" HAVING count(*) > 1"), 0o644))
	j2, err := job.LoadJob(filepath.Join(dir, "daily.toml"), pipelines.FS)
	require.NoError(t, err)
	require.NotEqual(t, part.SHA256, j2.TransformPart().SHA256)
	old, err := j2.ModelWith(v1)
	require.NoError(t, err)
	require.Equal(t, part, old.TransformPart())
	_, err = j2.ModelWith(";")
	require.ErrorContains(t, err, "the model is empty")

	// A numbered folder keeps working beside it: the folder form still
	// needs its transform_version.
	numbered := map[string]string{"daily.toml": modelJob, "models/daily/v1.sql": v1}
	jn, err := job.LoadJob(filepath.Join(writeTree(t, numbered), "daily.toml"), pipelines.FS)
	require.NoError(t, err)
	require.False(t, jn.ContentVersioned())
	require.Equal(t, 1, jn.TransformPart().Version)

	for _, tc := range []struct{ name, job, want string }{
		{"version given to a file", strings.Replace(fileJob, "pipeline = \"select\"\n", "pipeline = \"select\"\ntransform_version = 2\n", 1),
			"daily.toml:3: transform_version: model models/daily.sql is one file, whose version is its text's sha256: remove transform_version"},
		{"folder without a version", strings.Replace(modelJob, "transform_version = 1\n", "", 1),
			"daily.toml: transform_version: missing required key: model folder models/daily holds numbered versions"},
		{"no such file", strings.Replace(fileJob, "daily.sql", "weekly.sql", 1), "transform.sql: no model file"},
		{"file outside", strings.Replace(fileJob, "models/daily.sql", "../daily.sql", 1), "transform.sql: model file ../daily.sql"},
		{"pipeline without a version", "name = \"s\"\npipeline = \"sample\"\nschema_version = 1\n", "transform_version: missing required key"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			d := writeTree(t, map[string]string{"daily.toml": tc.job, "models/daily.sql": v1, "models/daily/v1.sql": v1})
			_, err := job.LoadJob(filepath.Join(d, "daily.toml"), pipelines.FS)
			var jfe *report.JobFileError
			require.ErrorAs(t, err, &jfe)
			require.ErrorContains(t, err, tc.want)
		})
	}
}

func TestUpstreamJobFileErrors(t *testing.T) {
	for _, tc := range []struct {
		name, job, model, want string
	}{
		{"undeclared upstream in the model", modelJob, "SELECT * FROM {{upstream:zones}}", "job zones is not a declared upstream: add it to [input] upstream"},
		{"self", strings.Replace(modelJob, `["trips"]`, `["daily"]`, 1), "SELECT 1 AS day", "input.upstream: job daily cannot read itself as an upstream"},
		{"twice", strings.Replace(modelJob, `["trips"]`, `["trips", "trips"]`, 1), "SELECT 1 AS day", "upstream trips is named twice"},
		{"bad name", strings.Replace(modelJob, `["trips"]`, `["a-b"]`, 1), "SELECT 1 AS day", `upstream "a-b" is not a job name`},
		{"files and upstream", strings.Replace(modelJob, "[input]\n", "[input]\npath = \"x.csv\"\n", 1), "SELECT 1 AS day", "a job reads files ([input] path) or upstream jobs, not both"},
		{"no key", strings.Replace(modelJob, "[target]\nkey = [\"day\"]\n", "", 1), "SELECT 1 AS day", "target.key: a model names the columns that identify one row"},
		{"no model folder", strings.Replace(modelJob, "models/daily", "models/none", 1), "SELECT 1 AS day", "transform.sql: no model folder"},
		{"no version", strings.Replace(modelJob, "transform_version = 1", "transform_version = 2", 1), "SELECT 1 AS day", "model folder "},
		{"other placeholder", modelJob, "SELECT * FROM {{table}}", "a model reads its upstream jobs with {{upstream:NAME}} and nothing else"},
		{"empty model", modelJob, " ;\n", "the model is empty"},
		{"outside", strings.Replace(modelJob, "models/daily", "../elsewhere", 1), "SELECT 1 AS day", "no model folder"},
		{"transform on a pipeline", "name = \"s\"\npipeline = \"sample\"\ntransform_version = 1\nschema_version = 1\n[transform]\nsql = \"m\"\n", "SELECT 1", "is not a model pipeline"},
		{"declared upstream read by another name", modelJob, "SELECT * FROM {{ ref('zones') }}", "job zones is not a declared upstream"},
		{"schema_version still required", "name = \"s\"\npipeline = \"sample\"\ntransform_version = 1\n", "SELECT 1", "schema_version: missing required key"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := writeTree(t, map[string]string{"daily.toml": tc.job, "models/daily/v1.sql": tc.model})
			_, err := job.LoadJob(filepath.Join(dir, "daily.toml"), pipelines.FS)
			require.Error(t, err)
			require.Contains(t, err.Error(), tc.want)
			var jfe *report.JobFileError
			require.ErrorAs(t, err, &jfe)
		})
	}
}

// TestModelUpstreamsFromSQL: a model's upstreams are what its SQL reads
// ({{upstream:x}}, or dbt's {{ ref('x') }}, which is the same text and so
// the same key), [input] upstream may be left out and must agree when
// present, and a model that reads nothing (a calendar) reads no file.
func TestModelUpstreamsFromSQL(t *testing.T) {
	t.Parallel()
	noInput := strings.Replace(modelJob, "[input]\nupstream = [\"trips\"]\n", "", 1)
	require.NotEqual(t, modelJob, noInput)
	load := func(jobText, model string) *job.Job {
		t.Helper()
		d := writeTree(t, map[string]string{"daily.toml": jobText, "models/daily/v1.sql": model})
		j, err := job.LoadJob(filepath.Join(d, "daily.toml"), pipelines.FS)
		require.NoError(t, err)
		return j
	}
	declared := load(modelJob, "SELECT day FROM {{upstream:trips}}")
	inferred := load(noInput, "SELECT day FROM {{upstream:trips}}")
	ref := load(noInput, "SELECT day FROM {{ ref('trips') }}")
	refQuoted := load(noInput, `SELECT day FROM {{ref("trips")}}`)
	for _, j := range []*job.Job{inferred, ref, refQuoted} {
		require.Equal(t, []string{"trips"}, j.Input.Upstream)
		require.Equal(t, declared.TransformPart(), j.TransformPart(), "the same model, the same key")
		require.Equal(t, declared.ModelSQL, j.ModelSQL)
		require.False(t, j.ReadsFiles())
	}
	two := load(noInput, "SELECT * FROM {{ ref('zones') }} JOIN {{upstream:trips}} USING (day) JOIN {{ref('zones')}} z2 USING (day)")
	require.Equal(t, []string{"trips", "zones"}, two.SortedUpstream())
	require.Equal(t, []string{"zones", "trips"}, two.Input.Upstream, "in order of first reading")

	cal := load(noInput, "SELECT CAST(d AS DATE) AS day FROM range(DATE '2024-01-01', DATE '2024-02-01', INTERVAL 1 DAY) AS t(d)")
	require.Empty(t, cal.Input.Upstream)
	require.False(t, cal.ReadsUpstream())
	require.False(t, cal.ReadsFiles(), "a model without upstreams reads nothing, not a missing file")
}

// TestDeclaredUpstreamMustBeRead: [input] upstream, when present, agrees
// with what the model reads: a declared job that neither the model nor a
// sql audit reads is refused at load (exit 2) naming the file, the line of
// upstream, the field and the job, unless a relationships audit checks
// against it; one read in a sql audit or a dependency comment is kept.
func TestDeclaredUpstreamMustBeRead(t *testing.T) {
	t.Parallel()
	two := strings.Replace(modelJob, `["trips"]`, `["trips", "zones"]`, 1)
	audit := func(body string) string { return two + "\n[[audit]]\n" + body }
	for _, tc := range []struct{ name, job, model, want string }{
		{"declared, never read", two, "SELECT day FROM {{upstream:trips}}",
			"daily.toml:7: input.upstream: upstream zones is declared but model daily never reads it: read it with {{upstream:zones}} (or {{ ref('zones') }}), or drop it from [input] upstream"},
		{"a model reading nothing", modelJob, "SELECT 1 AS day", "daily.toml:7: input.upstream: upstream trips is declared but model daily never reads it"},
		{"read by a sql audit", audit("kind = \"sql\"\nsql = \"SELECT day FROM {{upstream:zones}} WHERE day IS NULL\"\n"), "SELECT day FROM {{upstream:trips}}", ""},
		{"checked by a relationships audit", audit("kind = \"relationships\"\ncolumn = \"day\"\nto = \"zones.day\"\n"), "SELECT day FROM {{upstream:trips}}", ""},
		{"a not_null audit is no read", audit("kind = \"not_null\"\ncolumns = [\"day\"]\n"), "SELECT day FROM {{upstream:trips}}", "upstream zones is declared but model daily never reads it"},
		{"read through ref()", two, "SELECT day FROM {{ ref('trips') }} JOIN {{ref(\"zones\")}} USING (day)", ""},
		{"a dependency comment", two, "-- depends on {{upstream:zones}}\nSELECT day FROM {{upstream:trips}}", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			d := writeTree(t, map[string]string{"daily.toml": tc.job, "models/daily/v1.sql": tc.model})
			_, err := job.LoadJob(filepath.Join(d, "daily.toml"), pipelines.FS)
			if tc.want == "" {
				require.NoError(t, err)
				return
			}
			var jfe *report.JobFileError
			require.ErrorAs(t, err, &jfe)
			require.ErrorContains(t, err, tc.want)
			require.Equal(t, report.ExitUsage, report.ExitCode(err))
		})
	}
}
