// Package jobkey owns the job key: its four parts (Parts: input with the
// upstream snapshots and partitions read, transform, config, schema), their
// canonical JSON as the state row stores it, the key as the sha256 of that
// JSON, and which parts changed between two keys. What a job's parts are
// is computed by the job (internal/job/keyparts.go); the canonical JSON of
// every kind of job is pinned by internal/job/key_golden_test.go.
//
// It is pure: it must not import database/sql, DuckDB, or any idem
// package. runner/layering_test.go enforces this.
package jobkey
