package export

import (
	"context"
	"path/filepath"
	"strings"

	"github.com/idem-dev/idem/internal/catalog"
	"github.com/idem-dev/idem/internal/job"
	"github.com/idem-dev/idem/internal/report"
	"github.com/idem-dev/idem/internal/run"
)

// Options say what idem export writes.
type Options struct {
	Table       string // the job's target (default) or <target>_outcomes
	Snapshot    int64  // 0: the latest
	Out         string // file, or folder with PartitionBy
	Format      string // csv, parquet or jsonl; default from Out's extension, else csv
	PartitionBy string // one file per value of this column under Out, plus manifest.json
	// Progress shows the export as a step ("export"): DuckDB's percentage
	// while it sorts, then the bytes written.
	Progress report.Progress
	// Fault, when set, is called at each fault point (FaultExport*) for
	// kill tests.
	Fault func(point string)
	// unsignedZero writes -0.0 as 0.0 in the DOUBLE and REAL columns of a
	// CSV (catalog.UnsignedZeroCSVQuery): a rerun of a snapshot committed
	// on DuckDB 1.5.
	UnsignedZero bool
}

// Result reports an export. SHA256 and Bytes are the file's, or, for a
// partitioned export, the manifest's sha256 and the files' total bytes.
type Result struct {
	Job         string         `json:"job"`
	Table       string         `json:"table"`
	Snapshot    int64          `json:"snapshot"`
	Format      string         `json:"format"`
	Path        string         `json:"path"`
	Rows        int64          `json:"rows"`
	Bytes       int64          `json:"bytes"`
	SHA256      string         `json:"sha256"`
	PartitionBy string         `json:"partition_by,omitempty"`
	Files       []ManifestFile `json:"files,omitempty"`
}

// Manifest is the manifest.json of a partitioned export. It holds no time
// or host data, so one snapshot always gives the same bytes.
type Manifest struct {
	Job         string         `json:"job"`
	Table       string         `json:"table"`
	Snapshot    int64          `json:"snapshot"`
	Format      string         `json:"format"`
	PartitionBy string         `json:"partition_by"`
	Key         []string       `json:"key"`
	Rows        int64          `json:"rows"`
	Files       []ManifestFile `json:"files"`
}

// ManifestFile describes one file of a partitioned export.
type ManifestFile struct {
	Path         string  `json:"path"`  // relative to the export folder, with /; see partitionDir
	Value        *string `json:"value"` // the partition's value as text, null for NULL
	Rows         int64   `json:"rows"`
	DistinctKeys int64   `json:"distinct_keys"`
	Min          *string `json:"min"`
	Max          *string `json:"max"`
	Bytes        int64   `json:"bytes"`
	SHA256       string  `json:"sha256"`
}

// Format names the format of an export: the given one, or the one
// out's extension implies, or csv.
func Format(format, out string) (string, error) {
	switch strings.ToLower(format) {
	case job.FormatCSV, job.FormatParquet, job.FormatJSONL:
		return strings.ToLower(format), nil
	case "":
	default:
		return "", report.Usage("--format must be csv, parquet or jsonl, not %q", format)
	}
	switch strings.ToLower(filepath.Ext(out)) {
	case ".parquet":
		return job.FormatParquet, nil
	case ".jsonl", ".ndjson", ".json":
		return job.FormatJSONL, nil
	}
	return job.FormatCSV, nil
}

// copyOptions are the COPY options of each format. Every setting that
// shapes the bytes is spelled out, so the file does not depend on defaults
// that a thread count or a machine could change.
func copyOptions(format string) string {
	switch format {
	case job.FormatParquet:
		return "(FORMAT parquet, COMPRESSION snappy, ROW_GROUP_SIZE 122880)"
	case job.FormatJSONL:
		return "(FORMAT json)"
	default:
		return catalog.CSVCopyOptions
	}
}

func extension(format string) string {
	if format == job.FormatJSONL {
		return "jsonl"
	}
	return format
}

// Export writes a table of job, pinned at a snapshot, in key order. The same
// snapshot gives the same bytes whatever the thread count. It writes to a
// temporary file (or, partitioned, folder) beside the output and renames it
// into place, so a reader sees the previous export or the new one; it first
// removes the temporary files that killed exports to the same output left.
func Export(ctx context.Context, d *run.DB, j *job.Job, opts Options) (*Result, error) {
	if opts.Out == "" {
		return nil, report.Usage("export needs --out PATH")
	}
	format, err := Format(opts.Format, opts.Out)
	if err != nil {
		return nil, err
	}
	// One read transaction: every query below sees the same commit.
	conn, tx, err := d.BeginPinnedProgress(ctx, &opts.Progress)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	defer tx.Rollback()
	src, err := PinnedSource(ctx, tx, j, opts.Table, opts.Snapshot)
	if err != nil {
		return nil, err
	}
	res := &Result{Job: j.Name, Table: src.Table, Snapshot: src.Snapshot, Format: format, Path: opts.Out}
	done := opts.Progress.Start("export")
	defer done()
	fault := func(point string) {
		if opts.Fault != nil {
			opts.Fault(point)
		}
	}
	if opts.PartitionBy != "" {
		return res, exportPartitioned(ctx, tx, j, src, opts, res, fault)
	}
	rows, sum, size, err := copyQuery(ctx, tx, src.Ordered(), opts.Out, format, filepath.Base(opts.Out), opts.Progress, fault, opts.UnsignedZero)
	if err != nil {
		return nil, err
	}
	res.Rows, res.SHA256, res.Bytes = rows, sum, size
	return res, nil
}

// ManifestName is the file a partitioned export writes beside its parts.
const ManifestName = "manifest.json"
