// Package catalog owns idem's own tables in schema idem: their numbered
// migrations (migrations/NNNN_<name>.sql, embedded) and the catalog version
// a database is at, the job's state row, the ledger of batches, snapshot
// rows, history tables and pinned reads of them, the run log, released SQL,
// retained-input records, erasures, file records, table owners and the
// commit sequence that tells a foreign WAL. Every SQL text on idem.* lives
// here and nowhere else.
//
// Its functions take a Querier (a *sql.DB, *sql.Conn or *sql.Tx) or the
// run's *sql.Tx; they never begin, commit or roll back a data transaction
// (Migrate aside, which runs in one of its own before any), never read
// input files, and never import run, source or ops.
package catalog
