package env

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idem-dev/idem/internal/job"
	"github.com/idem-dev/idem/internal/jobkey"
	"github.com/idem-dev/idem/internal/pipeline"
)

// TestDefinitionChanges: each part of a key's definition that differs is
// named as a reader of the job's files would say it; the input part is
// never compared, and equal values read back from JSON (a float64 for an
// int) are equal.
func TestDefinitionChanges(t *testing.T) {
	t.Parallel()
	built := jobkey.Parts{
		Input:     "in-1",
		Transform: jobkey.TransformPart{Pipeline: "p", Version: 1, SHA256: "aaaaaaaaaaaaaaaa"},
		Config:    map[string]any{"params": map[string]any{"cap": float64(10), "mode": "x"}, "target": "t", "format": "csv"},
		Schema:    jobkey.SchemaPart{Version: 1, SHA256: "cccccccccccccccc"},
	}
	pipe := &job.Job{Name: "j", Pipeline: &pipeline.Pipeline{Name: "p"}}
	model := &job.Job{Name: "m", Pipeline: &pipeline.Pipeline{Name: "select", Model: true}, ModelFile: "models/m.sql"}
	same := built
	same.Input = "in-2"
	same.Upstream = []jobkey.UpstreamRef{{Job: "u", Snapshot: 9}}
	same.Config = map[string]any{"params": map[string]any{"cap": 10, "mode": "x"}, "target": "t", "format": "csv"}
	require.Empty(t, definitionChanges(pipe, built, same))

	now := built
	now.Transform.SHA256 = "bbbbbbbbbbbbbbbb"
	now.Config = map[string]any{"params": map[string]any{"cap": 20, "extra": true}, "target": "t2", "format": "csv"}
	now.Schema.SHA256 = "dddddddddddddddd"
	config := []string{
		"param cap (built from 10, now 20)",
		"param extra (built from absent, now true)",
		`param mode (built from "x", now absent)`,
		`config target (built from "t", now "t2")`,
	}
	with := func(first, last string) []string { return append(append([]string{first}, config...), last) }
	require.Equal(t, with("transform SQL of pipeline p v1 (built from sha256 aaaaaaaaaaaa, now bbbbbbbbbbbb)", "schema DDL v1 (built from sha256 cccccccccccc, now dddddddddddd)"),
		definitionChanges(pipe, built, now))
	require.Equal(t, with("model SQL models/m.sql (built from sha256 aaaaaaaaaaaa, now bbbbbbbbbbbb)", "the model's result columns"),
		definitionChanges(model, built, now))

	now = built
	now.Transform.Version, now.Schema.Version = 2, 3
	require.Equal(t, []string{"transform_version (built from 1, now 2)", "schema_version (built from 1, now 3)"}, definitionChanges(pipe, built, now))
	now.Transform.Pipeline = "q"
	require.Equal(t, []string{"pipeline (built from p, now q)", "schema_version (built from 1, now 3)"}, definitionChanges(pipe, built, now))
}
