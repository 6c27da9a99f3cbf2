// Package job owns what a job is before any database sees it: reading and
// validating a job file and the pipeline folder it names (built-in or on
// disk), params, the [[quality.rules]] as written, the SQL templates of
// pipeline steps, and the four parts of the job key with their canonical
// JSON. As the bottom layer it also owns what every layer shares: the
// error kinds and their exit codes (ExitCode maps them in one place), the
// decisions a run records, and Progress.
//
// It is pure: it must not import database/sql, DuckDB, or any other idem
// package. What needs a database stays above it: proving quality rules on
// a scratch DuckDB (run.ParseJob), hashing and staging input (source), and
// every command. runner/layering_test.go enforces this.
package job
