// Package publisher publishes every committed snapshot of an idem job as
// one Apache Iceberg snapshot of a table in a catalog (a SQL catalog,
// PostgreSQL or SQLite, or an Iceberg REST catalog) whose warehouse is a
// local folder or an s3:// object store, so that Spark, Trino and other
// engines read what idem committed. It is the library of the idem-iceberg
// binary and lives in a Go module of its own (publish/iceberg) so that the
// idem binary does not carry iceberg-go. It reads idem through the public
// package runner alone, as any extension may: Publish and Verify take a
// runner.Reader on the job's database and the job's runner.JobInfo.
//
// Publishing is a catch-up: Publish reads which idem snapshots the table's
// Iceberg snapshots already carry (summary properties idem.snapshot,
// idem.database_id, idem.job_key, idem.sha256) and commits each missing
// one in order, one Iceberg commit per idem snapshot, each guarded by the
// table's current snapshot (AssertRefSnapshotID): a second publisher that
// prepared against the same parent is refused (exit 3), never
// interleaved. A table published from another history (a database
// restored from a backup or recreated beside it) is refused (exit 3,
// ErrDiverged) until Options.Republish replaces it. A snapshot that
// changes no row is an empty append; a retype Iceberg cannot promote is
// published as a new column; an apply job's snapshots are appends plus
// equality deletes of the changed keys. A publisher killed at any point
// leaves no Iceberg snapshot or a complete one; files it wrote and never
// committed are deleted by the next publisher's orphan cleanup, and its
// temporary exports (beside the database) by the next publisher or an
// erasure.
package publisher
