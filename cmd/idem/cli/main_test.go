package cli

import (
	"testing"

	"github.com/idem-dev/idem/cmd/idem/cli/internal/clitest"
)

// TestMain runs the tests of the commands' wiring (flags, output, exit
// codes, job files, projects, the README); clitest.Main runs this test
// binary as idem in their child processes. The crash and stream tests are
// in ./crashtest, the tests of data between commands in ./datatest and of
// refusals in ./guardtest: four test binaries that go test runs side by
// side.
func TestMain(m *testing.M) {
	clitest.Main(m, clitest.CLI{Main: Main, Run: Run, HasFlag: CommandHasFlag})
}
