package ops

import (
	"context"
	"path/filepath"
	"slices"
	"strings"

	"github.com/idem-dev/idem/runner/catalog"
	"github.com/idem-dev/idem/runner/job"
	"github.com/idem-dev/idem/runner/run"
)

// ExportOptions say what idem export writes.
type ExportOptions struct {
	Table       string // the job's target (default) or <target>_outcomes
	Snapshot    int64  // 0: the latest
	Out         string // file, or folder with PartitionBy
	Format      string // csv, parquet or jsonl; default from Out's extension, else csv
	PartitionBy string // one file per value of this column under Out, plus manifest.json
	// Progress shows the export as a step ("export"): DuckDB's percentage
	// while it sorts, then the bytes written.
	Progress job.Progress
	// Fault, when set, is called at each fault point (FaultExport*) for
	// kill tests.
	Fault func(point string)
}

// ExportResult reports an export. SHA256 and Bytes are the file's, or, for a
// partitioned export, the manifest's sha256 and the files' total bytes.
type ExportResult struct {
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

// tableSource is a pinned read of one of a job's tables: its SELECT, its
// columns and the columns that identify a row.
type tableSource struct {
	table    string
	query    string
	columns  []string
	types    []string // DuckDB type of each column
	key      []string
	snapshot int64
	// unique says the key identifies a row: a target holds one row per key
	// (the rank step guarantees it, the tests assert it), and so does a
	// pinned read of its history.
	unique bool
}

// orderBy is the total order of an export: the key columns, then, unless
// the key is unique, every other column, so that rows equal in the key
// still have one order. Sorting on the key alone where it is unique keeps
// an export within a few percent of a raw COPY.
func (s *tableSource) orderBy() string {
	var order []string
	for _, k := range s.key {
		order = append(order, job.QuoteIdent(k))
	}
	if !s.unique {
		for _, c := range s.columns {
			if !slices.Contains(s.key, c) {
				order = append(order, job.QuoteIdent(c))
			}
		}
	}
	return " ORDER BY " + strings.Join(order, ", ")
}

func (s *tableSource) ordered() string { return s.query + s.orderBy() }

// pinnedSource builds the read of table as committed at snapshot (0: the
// latest). The target is read from its history (or, at the latest snapshot,
// from the table itself, which holds the same rows); <target>_outcomes holds
// the outcomes of the batches committed at or before the snapshot.
func pinnedSource(ctx context.Context, q catalog.Querier, j *job.Job, table string, snapshot int64) (*tableSource, error) {
	if table == "" {
		table = j.Table
	}
	s, latest, err := catalog.ResolveSnapshot(ctx, q, j.Name, snapshot)
	if err != nil {
		return nil, err
	}
	row, err := catalog.ReadSnapshot(ctx, q, j.Name, s)
	if err != nil {
		return nil, err
	}
	src := &tableSource{table: table, snapshot: s, key: row.KeyColumns}
	switch table {
	case j.Table:
		for _, c := range row.Columns {
			src.columns = append(src.columns, c.Name)
			src.types = append(src.types, c.Type)
		}
		src.unique = len(src.key) > 0
		if !src.unique {
			src.key = src.columns
		}
		if s == latest {
			src.query = "SELECT " + identList(src.columns) + " FROM " + job.QuoteIdent(j.Table)
		} else {
			src.query = catalog.PinnedSelect(j.Name, row.Columns, s)
		}
	case j.Table + "_outcomes":
		cols, err := catalog.TargetColumns(ctx, q, table)
		if err != nil {
			return nil, err
		}
		if len(cols) == 0 {
			return nil, job.Usage("job %s has no table %s", j.Name, table)
		}
		hasBatch := false
		for _, c := range cols {
			src.columns = append(src.columns, c.Name)
			src.types = append(src.types, c.Type)
			hasBatch = hasBatch || c.Name == "batch_id"
		}
		// Outcomes are a log: no column identifies a row, so all of them do.
		src.key = src.columns
		src.query = "SELECT " + identList(src.columns) + " FROM " + job.QuoteIdent(table)
		switch {
		case hasBatch:
			src.query += " WHERE batch_id IN (" + catalog.LedgerBatchesUpTo(j.Name, s) + ")"
		case s != latest:
			return nil, job.Usage("%s keeps the outcomes of the latest snapshot only (%d); it has no batch_id to pin snapshot %d", table, latest, s)
		}
	default:
		return nil, job.Usage("table %s: export reads the job's target %s or %s_outcomes", table, j.Table, j.Table)
	}
	return src, nil
}

func identList(cols []string) string {
	q := make([]string, len(cols))
	for i, c := range cols {
		q[i] = job.QuoteIdent(c)
	}
	return strings.Join(q, ", ")
}

// ExportFormat names the format of an export: the given one, or the one
// out's extension implies, or csv.
func ExportFormat(format, out string) (string, error) {
	switch strings.ToLower(format) {
	case job.FormatCSV, job.FormatParquet, job.FormatJSONL:
		return strings.ToLower(format), nil
	case "":
	default:
		return "", job.Usage("--format must be csv, parquet or jsonl, not %q", format)
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
		return "(FORMAT csv, HEADER true, DELIMITER ',', QUOTE '\"', ESCAPE '\"', NULLSTR '')"
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
func Export(ctx context.Context, d *run.DB, j *job.Job, opts ExportOptions) (*ExportResult, error) {
	if opts.Out == "" {
		return nil, job.Usage("export needs --out PATH")
	}
	format, err := ExportFormat(opts.Format, opts.Out)
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
	src, err := pinnedSource(ctx, tx, j, opts.Table, opts.Snapshot)
	if err != nil {
		return nil, err
	}
	res := &ExportResult{Job: j.Name, Table: src.table, Snapshot: src.snapshot, Format: format, Path: opts.Out}
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
	rows, sum, size, err := copyTo(ctx, tx, src.ordered(), opts.Out, format, filepath.Base(opts.Out), opts.Progress, fault)
	if err != nil {
		return nil, err
	}
	res.Rows, res.SHA256, res.Bytes = rows, sum, size
	return res, nil
}

// ManifestName is the file a partitioned export writes beside its parts.
const ManifestName = "manifest.json"
