// Package job owns what a job is before any database sees it: reading and
// validating a job file and the pipeline folder it names (built-in or on
// disk), params, the [[quality.rules]] as written, the SQL templates of
// pipeline steps, and the four parts of the job key with their canonical
// JSON. It also owns the errors of job files (JobFileError, UsageError).
//
// It is pure: it must not import database/sql, DuckDB, or any other idem
// package (runner, its commands or its tables). What needs a database stays
// in runner: proving quality rules on a scratch DuckDB (runner.ParseJob),
// hashing and staging input, and every command. runner/layering_test.go
// enforces this.
package job
