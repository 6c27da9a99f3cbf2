// Package runner is idem's public Go API: open a job file or a project of
// job files, plan, run, rerun a snapshot and export it, read a job's log
// and release packets, fence, roll back and expire, follow a stream, build
// and promote an environment, with typed results;
// back up and compact a database; run models' unit tests, lint a job,
// write a starting project and a project's documentation site.
//
//	p, err := runner.Open(ctx, []string{"configs/trips/"}, runner.WithThreads(2))
//	results, err := p.Run(ctx)                       // every job, in dependency order
//	res, err := p.RunJob(ctx, "zones", runner.Batch{Input: "zones-2.csv"})
//	fmt.Println(res.Decision, res.Snapshot, res.SHA256) // the committed snapshot's sha256
//	re, err := p.Rerun(ctx, "trips_daily", 0)        // prove the latest snapshot reproduces
//	ex, err := p.Export(ctx, "trips_daily", runner.ExportOptions{Out: "daily.csv"})
//	runs, err := p.Log(ctx, "trips_daily")           // idem log
//	pk, err := p.Show(ctx, "trips_daily", 0)         // idem show
//
// A Project holds no open database between calls. Every run commits in one
// transaction or not at all, exactly as the idem command's does (they share
// the code); errors are *JobError (or, for a whole project, *PartialError)
// wrapping the named errors ErrRefused, ErrLocked, ErrUsage, ..., and
// ExitCode gives the idem command's exit code for any of them.
//
// Extensions plug in through WithAfterCommit: a hook called after every
// commit (run, promote, erase, rollback, expire) with the Project, so that it reads what it
// publishes through this API (Project.Job names a job's [publish.iceberg],
// Project.Export writes a snapshot's rows, Project.OpenReader opens a
// Reader on the job's database: its kept snapshots, pinned reads of them
// as SQL, the canonical export), importing nothing from internal/; its
// error is an *AfterCommitError beside a result that stands. An
// extension's own verbs are commands of cmd/idem/cli's Extension, whose
// Hook makes such a hook for each command. The Iceberg publisher
// (publish/iceberg) is one, on this package alone (TestExtensionImports).
//
// Everything else lives under internal/ and may change between releases:
//
//	internal/report     error kinds and exit codes, decisions, progress,
//	                    the CLI's printing helpers (pure)
//	internal/sqltext    SQL text read without a database (pure)
//	internal/seal       which SQL a step may run (pure)
//	internal/jobkey     the job key: parts, canonical JSON, sha256 (pure)
//	internal/jobfs      a job's files read within bounds, inside their folder (pure)
//	internal/pipeline   a pipeline's folder: pipeline.toml, steps, schema,
//	                    the template language of the steps (pure)
//	internal/job        the job file, params, rules as written, models,
//	                    macros, a job's seal, expansion and key parts (pure)
//	internal/project    a set of jobs linked by their upstreams, in run order (pure)
//	internal/catalog    idem's own tables: every SQL text on idem.*
//	internal/source     inputs: resolve, hash, retain, stage; files, chunks, streams
//	internal/run        the database handle and the transaction of one run
//	internal/export     pinned reads of a job's tables; idem export
//	internal/lint       idem lint
//	internal/scaffold   idem init
//	internal/diff       idem diff: two reads of a table compared by key
//	internal/dbfile     the database file: idem compact, idem backup
//	internal/inspect    read-only looks: idem query, idem show, a Reader's reads
//	internal/history    rerun, erase, rollback, expire, checkpoints, log, fence
//	internal/planner    idem plan
//	internal/env        environments: run, diff and promote --env
//	internal/storage    idem du
//	internal/projectrun running a project: each job once its upstreams are
//	                    done, up to a limit; blocking; one open handle per
//	                    database file
//	internal/modeltest  idem test: unit tests of models in scratch databases
//	internal/docs       idem docs: a project's static site
//
// A package imports only the packages above it in this list
// (layering_test.go checks it); cmd/idem/cli parses flags, calls this
// package and prints, with internal/report as its printing helper only
// (TestCLIImports checks it).
// internal/lake (beneath source) reads Iceberg tables.
package runner
