// Package run owns the database handle and the run: Open (the lock, the
// file's creation and leftovers, the WAL check, the sweep of the
// retained-input store on open), the file-level work on the database that
// compact and backup need (Checkpoint, RewriteTo, SwapIn under the file's
// lock, CopyFileTo), the in-memory DuckDB that checks need, and
// one run of a job as one transaction on one pinned connection. runTx lists
// the run's phases in order: guards (decide) → retain → stage → steps →
// balance → history → commit rows, each a method of txRun (phases.go).
// RunFiles and RunChunks run a files-mode or chunked job batch by batch;
// LoadJob proves a job's quality rules on a scratch DuckDB; the run log of
// runs that commit nothing is written here, after the rollback.
//
// Run reads and writes idem's tables only through catalog and reads its
// input only through source's Input. It must not import ops, nor know any
// command other than a run: a plan only calls Prepare and DB.Decide.
package run
