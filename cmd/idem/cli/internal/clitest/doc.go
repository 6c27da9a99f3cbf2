// Package clitest is the kit of the idem CLI's test packages (cmd/idem/cli
// and its crashtest, datatest and guardtest): running the CLI in-process,
// or as a child process that is the test binary itself (Main), at a fault
// point, killed or blocked; fixtures built once per package run and copied
// (Once, FixtureDir, CopyDir); the example jobs and projects of the tests;
// and reading databases back (DumpState, CaptureState, QueryStrs).
//
// It imports no CLI: each test package's TestMain hands it cli.Main,
// cli.Run and cli.CommandHasFlag, so package cli's own tests can use it.
package clitest
