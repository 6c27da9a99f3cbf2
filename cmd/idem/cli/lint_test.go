package cli

import (
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/idem-dev/idem/cmd/idem/cli/internal/clitest"
	"github.com/stretchr/testify/require"
)

// TestLintExitCodes: findings of severity error exit 1, a clean job exits
// 0, a job file that cannot be loaded exits 2.
func TestLintExitCodes(t *testing.T) {
	t.Parallel()
	code, out, _ := clitest.InProcess(t, "lint", filepath.Join("..", "..", "..", "internal", "lint", "testdata", "lint", "bad.toml"), "--json")
	require.Equal(t, 1, code)
	var rep struct {
		Findings []struct{ ID, Severity, Fix string }
		Errors   int
		Warnings int
	}
	require.NoError(t, json.Unmarshal([]byte(out), &rep))
	require.Equal(t, 6, rep.Errors)
	require.Equal(t, 5, rep.Warnings)

	code, out, _ = clitest.InProcess(t, "lint", filepath.Join("..", "..", "..", "configs", "trips.toml"))
	require.Equal(t, 0, code)
	require.Contains(t, out, "0 error(s), 0 warning(s)")

	dir := t.TempDir()
	clitest.WriteFile(t, filepath.Join(dir, "job.toml"), "name = \"x\"\npipeline = \"nope\"\ntransform_version = 1\nschema_version = 1\n")
	code, _, errOut := clitest.InProcess(t, "lint", filepath.Join(dir, "job.toml"))
	require.Equal(t, 2, code)
	require.Contains(t, errOut, "pipeline")
}
