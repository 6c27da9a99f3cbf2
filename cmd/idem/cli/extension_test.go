package cli

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idem-dev/idem/cmd/idem/cli/internal/clitest"
	"github.com/idem-dev/idem/runner"
)

// TestExtensionHook: an extension's public hook (Extension.Hook, a
// runner.AfterCommit) follows a command's commit with what it committed;
// its failure is a warning on stderr and the command exits 0 with its
// result printed, the commit standing.
func TestExtensionHook(t *testing.T) {
	t.Parallel()
	j := clitest.AppliedGuardJob(t)
	var commits []runner.Commit
	ext := Extension{Name: "idem-test", Hook: func(_, _ io.Writer, _ func(string) func(string)) runner.AfterCommit {
		return func(_ context.Context, p *runner.Project, c runner.Commit) error {
			commits = append(commits, c)
			return errors.New("catalog down")
		}
	}}
	var stdout, stderr bytes.Buffer
	code := mainExt(context.Background(), []string{"expire", j.File, "--keep-snapshots", "1"}, &stdout, &stderr, os.Getenv, ext)
	require.Equal(t, 0, code, stderr.String())
	require.Equal(t, []runner.Commit{{Job: clitest.ApplyJobName, Verb: "expire", Snapshot: 1, Committed: true}}, commits)
	require.Contains(t, stdout.String(), clitest.ApplyJobName+": nothing to expire")
	require.Equal(t, "idem-test: warning: "+clitest.ApplyJobName+": the commit stands but publishing to Iceberg failed (the next run or idem-test publish "+j.File+" catches up): catalog down\n", stderr.String())

	stdout.Reset()
	stderr.Reset()
	code = mainExt(context.Background(), []string{"expire", j.File, "--keep-snapshots", "1", "--dry-run"}, &stdout, &stderr, os.Getenv, ext)
	require.Equal(t, 0, code, stderr.String())
	require.Len(t, commits, 1, "a dry run commits nothing: no hook")
	require.Empty(t, stderr.String())
}
