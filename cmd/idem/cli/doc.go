// Package cli is the idem command line: the cobra commands, one file per
// command, each parsing its flags, making one call into the public API
// (package runner) and printing, with internal/report as its printing helper
// (numbers, versions, usage errors) and nothing else under internal/:
// runner's TestCLIImports fails when a file reaches past runner. It holds
// no SQL and makes no decision. cmd/idem's main calls Run; tests call Main
// in-process with their own writers. A binary that adds to the command
// (idem-iceberg) calls MainWith with its Extension: a hook after every
// commit, made from runner's AfterCommit, and commands of its own.
package cli
