// Package project owns a set of jobs run together: it reads job files and
// folders of job files, links each job to the jobs of its project it reads
// as upstreams (same database, by name), orders them so every job runs
// after its upstreams, picks a part of the project with --select, and says
// which jobs a failure blocks.
//
// It is pure like job: it must not import database/sql, DuckDB, or any idem
// package but job. Running the jobs (each in its own transaction, in this
// order) is the caller's; an upstream outside the project is read from what
// its job committed, which only the run can check.
package project
