// Package inspect owns the read-only looks into a job's database: idem
// query (one read-only statement, its rows as canonical text), idem show
// (a snapshot's release packet, its pending entries computed from the
// rows), the DuckDB version, and what an extension reads through runner's
// Reader (the kept snapshots, the canonical CSV of a query, a folder for
// its temporary exports).
//
// It commits nothing to a job's tables.
package inspect
