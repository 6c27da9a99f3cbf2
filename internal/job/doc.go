// Package job owns what a job is before any database sees it: reading and
// validating a job file and the pipeline folder it names (built-in or on
// disk), params, the [[quality.rules]] as written, the SQL templates of
// pipeline steps, and the four parts of the job key with their canonical
// JSON. The error kinds, decisions and Progress every layer shares are in
// internal/report, below it.
//
// It is pure: it must not import database/sql, DuckDB, or any idem
// package but internal/report. What needs a database stays above it:
// proving quality rules on a scratch DuckDB (run.ParseJob), hashing and
// staging input (source), and every command. runner/layering_test.go
// enforces this.
package job
