// Package runner is idem's library, in layers; a package imports only the
// packages below it (layering_test.go checks it):
//
//	job      the job file, pipeline, params, rules as written, templates,
//	         key parts, error kinds and exit codes, Progress (pure)
//	project  a set of jobs linked by their upstreams, in run order (pure)
//	catalog  idem's own tables: every SQL text on idem.*
//	source   inputs: resolve, hash, retain, stage; files and chunks modes
//	run      the database handle and the transaction of one run
//	ops      the commands that are not a run (export, diff, rerun, erase,
//	         rollback, lint, plan, query, fence, log, scaffold)
//
// cmd/idem parses flags, calls one function of run or ops and prints.
package runner
