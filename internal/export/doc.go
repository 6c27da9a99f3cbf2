// Package export owns reading a job's tables as committed at a snapshot
// and writing them out: the pinned reads (PinnedSource, PinnedRead) that
// diff, show, environments and publishers share, the canonical export in
// key order (CSV, Parquet with its exact type table ParquetTypes, JSONL,
// or one file per partition with a manifest), its temporary folders and
// the atomic swap that puts a finished export in place, and the audits
// over an exported folder (Audit).
//
// It is the lowest of the packages split from the commands: it uses
// catalog, job and run, and no other command's package.
package export
