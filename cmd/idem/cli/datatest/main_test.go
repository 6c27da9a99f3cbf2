package datatest

import (
	"testing"

	"github.com/idem-dev/idem/cmd/idem/cli"
	"github.com/idem-dev/idem/cmd/idem/cli/internal/clitest"
)

// The tests of this package prove through the CLI what a user relies on
// between commands: snapshots and their history, retention, expire,
// compact, backup, the read replica, partitions, erasure, fencing.
// clitest.Main runs this test binary as idem in their child processes.
func TestMain(m *testing.M) {
	clitest.Main(m, clitest.CLI{Main: cli.Main, Run: cli.Run, HasFlag: cli.CommandHasFlag})
}
