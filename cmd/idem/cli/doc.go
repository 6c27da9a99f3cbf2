// Package cli is the idem command line: the cobra commands, one file per
// command, each parsing its flags, calling the runner package or one
// function of internal/run, internal/ops or internal/projectrun, and
// printing. It holds no SQL and makes no decision. cmd/idem's main calls
// Run; tests call Main in-process with their own writers.
package cli
