package icebergtest

import (
	"testing"

	"github.com/idem-dev/idem/cmd/idem/cli"
	"github.com/idem-dev/idem/cmd/idem/cli/internal/clitest"
)

// The tests of this package run idem on Apache Iceberg tables ([input]
// iceberg) through the CLI: tiny tables written by internal/lake/laketest
// (the publish/iceberg module cross-checks the reader on tables iceberg-go
// wrote), read at pinned snapshots, rerun, and killed mid-read.
func TestMain(m *testing.M) {
	clitest.Main(m, clitest.CLI{Main: cli.Main, Run: cli.Run, HasFlag: cli.CommandHasFlag})
}
