package crashtest

import (
	"testing"

	"github.com/idem-dev/idem/cmd/idem/cli"
	"github.com/idem-dev/idem/cmd/idem/cli/internal/clitest"
)

// The tests of this package SIGKILL idem at its fault points and at random
// delays, stop it mid-open, mid-migration and mid-stream, and prove the
// database and files afterwards are exactly the last commit and the next
// command finishes the work (docs/reliability.md); the Kafka and SSE
// stream tests, their kill tests included, are in streamtest. clitest.Main
// runs this test binary as idem in their child processes.
func TestMain(m *testing.M) {
	clitest.Main(m, clitest.CLI{Main: cli.Main, Run: cli.Run, HasFlag: cli.CommandHasFlag})
}
