// Package diff owns comparing two reads of a job's table by key: idem diff
// of two snapshots (Diff) or of two exported files (DiffFiles), the rows
// added, removed and changed with the columns that changed (diff_rows.go),
// and the column changes between two schemas that plan reports. Rerun,
// environments and plan build their comparisons on it.
//
// It reads through export's pinned reads and writes nothing.
package diff
