package runner

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	idemsql "github.com/idem-dev/idem/sql"
)

func lintSummary(rep *LintReport) []string {
	out := []string{}
	for _, f := range rep.Findings {
		out = append(out, fmt.Sprintf("%s %s %s:%d", f.ID, f.Severity, filepath.Base(f.File), f.Line))
	}
	return out
}

// TestLintFindsEachProblem: the fixture pipeline holds each problem once.
func TestLintFindsEachProblem(t *testing.T) {
	t.Parallel()
	rep, err := LintJob(context.Background(), "testdata/lint/bad.toml", idemsql.FS)
	require.NoError(t, err)
	require.Equal(t, []string{
		"L001 error pipeline.toml:0",
		"L005 warning pipeline.toml:0",
		"L006 error pipeline.toml:0",
		"L003 error 01_stage.sql:8",
		"L002 error 02_rank.sql:6",
		"L004 error 02_rank.sql:7",
		"L003 error 02_rank.sql:8",
		"L004 warning 04_commit.sql:3",
		"L004 error 04_commit.sql:6",
	}, lintSummary(rep))
	require.Equal(t, 7, rep.Errors)
	require.Equal(t, 2, rep.Warnings)
	for _, f := range rep.Findings {
		require.NotEmpty(t, f.Fix, f.ID)
		require.NotEmpty(t, f.Message, f.ID)
	}
	require.Contains(t, rep.Findings[1].Message, "param unused")
	require.Contains(t, rep.Findings[2].Message, "no step stores rows in lint_bad_results")
	require.Contains(t, rep.Findings[3].Message, "now()")
	require.Contains(t, rep.Findings[5].Message, "string_agg()")
	require.Contains(t, rep.Findings[6].Message, "random()")
}

// TestLintJobWithoutKey: a merge_by_key job without key columns is finding
// L001, not a load error.
func TestLintJobWithoutKey(t *testing.T) {
	t.Parallel()
	rep, err := LintJob(context.Background(), "testdata/lint/nokey.toml", idemsql.FS)
	require.NoError(t, err)
	require.Equal(t, []string{"L001 error nokey.toml:10"}, lintSummary(rep))
}

// TestLintSilentOnBuiltins: every example job, and so every built-in
// pipeline, lints clean.
func TestLintSilentOnBuiltins(t *testing.T) {
	t.Parallel()
	jobs, err := filepath.Glob("../configs/*.toml")
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(jobs), 3)
	seen := map[string]bool{}
	for _, j := range jobs {
		rep, err := LintJob(context.Background(), j, idemsql.FS)
		require.NoError(t, err, j)
		require.Empty(t, rep.Findings, j)
		seen[rep.Pipeline] = true
	}
	for _, name := range BuiltinNames(idemsql.FS) {
		require.True(t, seen[name], "no example job lints built-in pipeline %s", name)
	}
}
