package dbtclitest

import (
	"testing"

	"github.com/idem-dev/idem/cmd/idem/cli"
	"github.com/idem-dev/idem/cmd/idem/cli/internal/clitest"
)

// The tests of this package run idem as a dbt user porting a project
// would: seeds (reference tables) with conflicting keys, rerun --deep over
// a diamond, run --full-refresh. clitest.Main runs this test binary as
// idem in their child processes.
func TestMain(m *testing.M) {
	clitest.Main(m, clitest.CLI{Main: cli.Main, Run: cli.Run, HasFlag: cli.CommandHasFlag})
}
