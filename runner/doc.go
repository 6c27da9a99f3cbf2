// Package runner is idem's public Go API: open a job file or a project of
// job files, plan, run, rerun a snapshot and export, with typed results.
// Everything else (the job file, the catalog of idem's own tables, inputs,
// the transaction of one run, the other commands) lives under internal/
// and may change between releases:
//
//	internal/job      the job file, pipeline, params, rules as written,
//	                  templates, key parts, error kinds and exit codes (pure)
//	internal/project  a set of jobs linked by their upstreams, in run order (pure)
//	internal/catalog  idem's own tables: every SQL text on idem.*
//	internal/source   inputs: resolve, hash, retain, stage; files, chunks, streams
//	internal/run      the database handle and the transaction of one run
//	internal/ops      the commands that are not a run (export, diff, rerun,
//	                  erase, rollback, lint, plan, query, fence, log, ...)
//
// A package imports only the packages above it in this list
// (layering_test.go checks it); cmd/idem parses flags, calls this package
// or one function of run or ops, and prints.
package runner
