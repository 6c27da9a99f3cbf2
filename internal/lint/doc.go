// Package lint owns idem lint: the checks of a job's pipeline SQL for
// plans that would not re-run safely (findings L001..L010 and STREAM-*),
// each with where it is and how to fix it. The SQL is read with DuckDB's
// own parser (json_serialize_sql), on a scratch in-memory database.
//
// It reads a job file and its pipeline; it opens no job's database.
package lint
