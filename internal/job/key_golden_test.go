package job_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idem-dev/idem/internal/job"
	"github.com/idem-dev/idem/internal/jobkey"
	"github.com/idem-dev/idem/internal/pipeline"
	"github.com/idem-dev/idem/pipelines"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

// TestKeyGolden pins the job key of every kind of job: the canonical JSON
// of its four parts and the sha256 over them, in
// testdata/key/<case>/key.golden. A change to the parts' JSON (a renamed
// field or tag, a new config entry, another encoding) changes every job's
// key, so every job reloads on its next run: this test fails then, with a
// diff of the parts. Rewrite the goldens (go test ./internal/job -run
// TestKeyGolden -update) only for a change of the key meant to reload jobs.
//
// The parts are assembled as run.Prepare does: the input part (which
// source computes from the input's bytes, and which an upstream input
// leaves empty) and the format are fixed here, as are the upstream
// snapshots and a model's result columns, which a run reads from the
// database.
func TestKeyGolden(t *testing.T) {
	t.Parallel()
	input := func(name string) string { return pipeline.DigestString("the input bytes of " + name) }
	cases := []struct {
		name   string
		format string // the input format source resolves: the job's, or the file extension's
		input  string
		// upstream, partitions and modelColumns are what the run adds.
		upstream     []jobkey.UpstreamRef
		partitions   []string
		modelColumns []string
	}{
		{name: "sample_params", format: "csv", input: input("sample_params")},
		{name: "versioned_changes", format: "jsonl", input: input("versioned_changes")},
		{name: "orders", format: "jsonl", input: input("orders")},
		{name: "merge_by_key", format: "csv", input: input("merge_by_key")},
		{name: "select_model", upstream: []jobkey.UpstreamRef{
			{Job: "trips", Snapshot: 7, JobKey: pipeline.DigestString("trips key")},
			{Job: "zones", Snapshot: 2, JobKey: pipeline.DigestString("zones key")},
		}, modelColumns: []string{"day DATE", "zone VARCHAR", "n BIGINT"}},
		// A macro beside a model that does not call it leaves its key
		// as it was (select_model holds one); the macros a model calls
		// are part of its transform part.
		{name: "select_model_macros", upstream: []jobkey.UpstreamRef{
			{Job: "trips", Snapshot: 7, JobKey: pipeline.DigestString("trips key")},
			{Job: "zones", Snapshot: 2, JobKey: pipeline.DigestString("zones key")},
		}, modelColumns: []string{"day DATE", "zone VARCHAR", "n BIGINT"}},
		{name: "partitioned", format: "csv", input: input("partitioned"), partitions: []string{"2019", "2020"}},
		{name: "files_mode", format: "jsonl", input: input("files_mode")},
		{name: "chunked", format: "parquet", input: input("chunked")},
		{name: "kafka", format: "jsonl", input: input("kafka")},
		{name: "sse", format: "jsonl", input: input("sse")},
		{name: "extra_columns_ignore", format: "jsonl", input: input("extra_columns_ignore")},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			dir := filepath.Join("testdata", "key", c.name)
			j, err := job.LoadJob(filepath.Join(dir, "job.toml"), pipelines.FS)
			require.NoError(t, err)
			parts := jobkey.Parts{
				Input:     c.input,
				Transform: j.TransformPart(),
				Config:    j.Config(c.format),
				Schema:    j.SchemaPart(),
			}
			parts.Partitions = c.partitions
			parts.Upstream = c.upstream
			if j.IsModel() {
				parts.Schema = j.ModelSchemaPart(c.modelColumns)
			}
			got := keyGolden(t, c.name, parts)
			file := filepath.Join(dir, "key.golden")
			if *update {
				require.NoError(t, os.WriteFile(file, []byte(got), 0o644))
			}
			want, err := os.ReadFile(file)
			require.NoError(t, err, "no golden file: run go test ./internal/job -run TestKeyGolden -update")
			require.Equal(t, string(want), got, "the job key of %s changed: every such job would reload; rewrite %s with -update only if that is meant", c.name, file)
		})
	}
}

// keyGolden is the golden text of parts: the key, then the canonical JSON
// it is the sha256 of, indented one field a line so that a diff names the
// field that changed.
func keyGolden(t *testing.T, name string, parts jobkey.Parts) string {
	t.Helper()
	canonical := jobkey.CanonicalJSON(parts)
	require.Equal(t, parts.JSON(), string(canonical))
	require.Equal(t, pipeline.DigestString(string(canonical)), parts.Key(), "the key is the sha256 of the canonical JSON")
	var indented bytes.Buffer
	require.NoError(t, json.Indent(&indented, canonical, "", "  "))
	return fmt.Sprintf("# The job key of testdata/key/%s/job.toml and the canonical JSON of its\n"+
		"# parts (key_golden_test.go; rewritten only by go test -run TestKeyGolden -update).\n"+
		"key %s\n%s\n", name, parts.Key(), indented.String())
}
