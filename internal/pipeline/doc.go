// Package pipeline owns a pipeline as its folder holds it: pipeline.toml
// (mode, input columns, key, params and their types, the outcomes table,
// what it reads), its versioned transform steps and schema files
// (Pipeline.Transform, Pipeline.Schema), and the digests of their SQL that
// the job key's transform part names (StepsDigest, DigestString), and the
// template language of its steps: {{table}}, {{upstream:NAME}}, the
// column lists of a generic pipeline over a Shape (template.go,
// placeholders.go: ExpandTemplate). Load reads one from a file system (a
// built-in's embedded folder, or a folder on disk through
// jobfs.ConfinedFS); which pipeline a job names, and the Shape its steps
// expand against (Job.Expand), belong to internal/job.
//
// It is pure: it must not import database/sql, DuckDB, or any idem
// package but internal/report, internal/sqltext, internal/seal (the
// relation {{upstream:NAME}} names) and internal/jobfs.
// runner/layering_test.go enforces this.
package pipeline
