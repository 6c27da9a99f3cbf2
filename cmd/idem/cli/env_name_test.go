package cli

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idem-dev/idem/cmd/idem/cli/internal/clitest"
	"github.com/idem-dev/idem/internal/report"
)

// TestEnvNameEmpty: --env given an empty name is a usage error (exit 2)
// for every command that takes --env, as every other name no environment
// can have is; run took it for no --env and wrote production.
func TestEnvNameEmpty(t *testing.T) {
	t.Parallel()
	p := clitest.NewProject(t)
	db := p.DB("p")
	for _, cmd := range []string{"run", "plan", "diff", "promote"} {
		for _, flag := range [][]string{{"--env", ""}, {"--env="}, {"--env", "../prod"}} {
			args := append([]string{cmd, p.Dir}, flag...)
			r := p.Idem(args...)
			require.Equal(t, report.ExitUsage, r.Code, "%v: stdout %s stderr %s", args, r.Stdout, r.Stderr)
			require.Contains(t, r.Stderr, "--env \"", "%v", args)
			require.Contains(t, r.Stderr, "an environment name is 1 to 64 letters", "%v", args)
			require.NoFileExists(t, db, "%v wrote production", args)
		}
	}
}
