// Package runner is idem's public Go API: open a job file or a project of
// job files, plan, run, rerun a snapshot and export it, with typed results.
//
//	p, err := runner.Open(ctx, []string{"configs/trips/"}, runner.WithThreads(2))
//	results, err := p.Run(ctx)                       // every job, in dependency order
//	res, err := p.RunJob(ctx, "zones", runner.Batch{Input: "zones-2.csv"})
//	re, err := p.Rerun(ctx, "trips_daily", 0)        // prove the latest snapshot reproduces
//	ex, err := p.Export(ctx, "trips_daily", runner.ExportOptions{Out: "daily.csv"})
//
// A Project holds no open database between calls. Every run commits in one
// transaction or not at all, exactly as the idem command's does (they share
// the code); errors are *JobError (or, for a whole project, *PartialError)
// wrapping the named errors ErrRefused, ErrLocked, ErrUsage, ..., and
// ExitCode gives the idem command's exit code for any of them.
//
// Everything else lives under internal/ and may change between releases:
//
//	internal/job        the job file, pipeline, params, rules as written,
//	                    templates, key parts, error kinds and exit codes (pure)
//	internal/project    a set of jobs linked by their upstreams, in run order (pure)
//	internal/catalog    idem's own tables: every SQL text on idem.*
//	internal/source     inputs: resolve, hash, retain, stage; files, chunks, streams
//	internal/run        the database handle and the transaction of one run
//	internal/ops        the commands that are not a run (export, diff, rerun,
//	                    erase, rollback, lint, plan, query, fence, log, ...)
//	internal/projectrun running a project: order, blocking, concurrent groups,
//	                    one open handle per database file
//	internal/modeltest  idem test: unit tests of models in scratch databases
//	internal/docs       idem docs: a project's static site
//
// A package imports only the packages above it in this list (ops,
// projectrun, modeltest and docs sit side by side; layering_test.go checks
// it). cmd/idem/cli does not import this package: it parses flags, calls
// run, ops, projectrun, modeltest or docs itself, and prints.
package runner
