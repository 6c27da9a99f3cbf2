package guardtest

import (
	"testing"

	"github.com/idem-dev/idem/cmd/idem/cli"
	"github.com/idem-dev/idem/cmd/idem/cli/internal/clitest"
)

// The tests of this package prove what idem refuses: a table changed or
// dropped behind a job's back, a table of another job, a query that would
// write, a step that reaches outside its job. clitest.Main runs this test
// binary as idem in their child processes.
func TestMain(m *testing.M) {
	clitest.Main(m, clitest.CLI{Main: cli.Main, Run: cli.Run, HasFlag: cli.CommandHasFlag})
}
