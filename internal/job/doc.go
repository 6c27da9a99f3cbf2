// Package job owns what a job is before any database sees it: reading and
// validating a job file and which pipeline it names (built-in or on disk),
// params, the [[quality.rules]] as written, a step's SQL expanded for the
// job (expand.go), models, a project's macros folder, the
// Seal and SealedTexts of a job (jobseal.go), and a job's key parts
// (keyparts.go). Below it: internal/report (the error kinds, decisions and
// Progress every layer shares), internal/sqltext (SQL text),
// internal/seal (which SQL a step may run), internal/jobkey (the key),
// internal/jobfs (reading its files safely) and internal/pipeline (a
// pipeline's folder).
//
// It is pure: it must not import database/sql, DuckDB, or any idem
// package but those. What needs a database stays above it: proving
// quality rules on a scratch DuckDB (run.ParseJob), hashing and staging
// input (source), and every command. runner/layering_test.go enforces
// this.
package job
