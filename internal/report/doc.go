// Package report owns what every layer of idem shares and reports the same
// way: the error kinds and their exit codes (errors.go: ExitCode maps them
// in one place), the decisions a run records (decision.go), Progress, and
// the printing helpers of the CLI (helpers.go: Thousands, VersionText,
// Usage and UsageError live in errors.go).
//
// It is the floor of the package graph: it must not import database/sql,
// DuckDB, or any other idem package. runner/layering_test.go enforces this.
package report
