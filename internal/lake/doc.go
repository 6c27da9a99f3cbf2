// Package lake reads Apache Iceberg tables natively, without iceberg-go
// (which lives in the publish/iceberg module) and without DuckDB's iceberg
// extension (not bundled here): the table metadata JSON (snapshots,
// schemas, partition specs, the table's UUID), the Avro manifest list and
// manifests of one snapshot, and from them the Parquet data files and the
// position and equality delete files that a read of that snapshot must
// apply. Files are reached through a Store (Local: plain paths and file://
// locations); an object store is another Store.
//
// Lake knows nothing of jobs or runs: source.Iceberg turns a Scan into the
// input a run stages.
package lake
