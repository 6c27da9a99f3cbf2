// Package seal owns which SQL a job's step may run, as far as that is
// decided without a database: a Seal (what the job may read and write)
// checks each SealedText (a schema file, a step, an audit, a macro) for the
// kind and target of every statement (sealstmt.go), the volatile and
// session functions DuckDB's catalog names (sqlfuncs.go, recorded per
// engine version in enginefuncs_gen.go), and the relations and table
// functions its queries read (seal.go); and a macro file's head
// (sealmacro.go). A job makes its Seal and its texts (job.Job.Seal,
// SealedTexts); the run adds what needs the database (internal/run).
//
// It is pure: it must not import database/sql, DuckDB, or any idem
// package but internal/report and internal/sqltext.
// runner/layering_test.go enforces this.
package seal
