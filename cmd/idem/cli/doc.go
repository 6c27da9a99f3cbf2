// Package cli is the idem command line: the cobra commands, one file per
// command, each parsing its flags, calling one function of internal/run,
// internal/ops, internal/projectrun, internal/modeltest or internal/docs,
// and printing. It does not import the public package runner: both sit on
// those packages. It holds no SQL and makes no decision. cmd/idem's main
// calls Run; tests call Main in-process with their own writers; a binary
// that adds commands or publishes after a commit calls RunWith with an
// Extension.
package cli
