package streamtest

import (
	"testing"

	"github.com/idem-dev/idem/cmd/idem/cli"
	"github.com/idem-dev/idem/cmd/idem/cli/internal/clitest"
)

// The tests of this package run idem on the inputs that arrive from
// outside: streams, Kafka (franz-go's in-process kfake cluster) and
// server-sent events (an httptest server), and Iceberg tables
// (iceberg_*_test.go), through the CLI, and SIGKILL it mid-stream or
// mid-read to prove each record lands exactly once. They were split from crashtest so that each package stays
// within CI's time per package. clitest.MainWaiting runs this test binary
// as idem in their child processes, and two tests at once on two cores:
// they mostly wait for a broker, a batch interval or a child process.
func TestMain(m *testing.M) {
	clitest.MainWaiting(m, clitest.CLI{Main: cli.Main, Run: cli.Run, HasFlag: cli.CommandHasFlag})
}
