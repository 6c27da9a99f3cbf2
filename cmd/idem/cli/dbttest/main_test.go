package dbttest

import (
	"testing"

	"github.com/idem-dev/idem/cmd/idem/cli"
	"github.com/idem-dev/idem/cmd/idem/cli/internal/clitest"
)

// The tests of this package port a dbt project to idem as dbt users write
// it. clitest.Main runs this test binary as idem in their child processes.
func TestMain(m *testing.M) {
	clitest.Main(m, clitest.CLI{Main: cli.Main, Run: cli.Run, HasFlag: cli.CommandHasFlag})
}
