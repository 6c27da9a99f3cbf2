// Package publisher publishes every committed snapshot of an idem job as
// one Apache Iceberg snapshot of a table in a SQL catalog (PostgreSQL or
// SQLite), so that Spark, Trino and other engines read what idem
// committed. It is the library of the idem-iceberg binary and lives in a
// Go module of its own (publish/iceberg) so that the idem binary does not
// carry iceberg-go.
//
// Publishing is a catch-up: Publish reads which idem snapshots the table's
// Iceberg snapshots already carry (summary property idem.snapshot) and
// commits each missing one in order, one Iceberg commit per idem snapshot,
// each guarded by the table's current snapshot (AssertRefSnapshotID): a
// second publisher that prepared against the same parent is refused (exit
// 3), never interleaved. A publisher killed at any point leaves no Iceberg
// snapshot or a complete one; files it wrote and never committed are
// deleted by the next publisher's orphan cleanup.
package publisher
