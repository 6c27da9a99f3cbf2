// Package cli is the idem command line: the cobra commands, one file per
// command, each parsing its flags, making one call into the public API
// (package runner) and printing, with internal/job as its printing helper
// (numbers, versions, usage errors). The commands not yet moved onto
// runner (run, plan, diff, rerun, export, erase, env, promote, query and
// the stream and project paths) still call internal/run, internal/ops or
// internal/projectrun: runner's TestCLIImports lists them and fails when
// a file reaches past runner anew. It holds no SQL and makes no decision.
// cmd/idem's main calls Run; tests call Main in-process with their own
// writers.
package cli
