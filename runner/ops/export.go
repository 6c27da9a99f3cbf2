package ops

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"github.com/idem-dev/idem/runner/run"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/idem-dev/idem/runner/source"

	"github.com/idem-dev/idem/runner/catalog"

	"github.com/idem-dev/idem/runner/job"
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

// copyTo runs COPY (query) TO a temporary file beside out, renames it to out
// and returns the rows written and the file's sha256 and size. progress
// sees the bytes written so far under label; fault, if not nil, is called
// before the rename. Temporary files that killed exports to out left are
// removed first.
func copyTo(ctx context.Context, q catalog.Querier, query, out, format, label string, progress job.Progress, fault func(string)) (int64, string, int64, error) {
	dir := filepath.Dir(out)
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		return 0, "", 0, fmt.Errorf("export to %s: folder %s does not exist", out, dir)
	}
	if st, err := os.Stat(out); err == nil && st.IsDir() {
		return 0, "", 0, fmt.Errorf("export to %s: is a folder (use --partition-by to write a folder)", out)
	}
	if err := cleanExportTemps(out); err != nil {
		return 0, "", 0, err
	}
	tmpName, err := exportTempName(out)
	if err != nil {
		return 0, "", 0, err
	}
	defer os.Remove(tmpName)
	// Hash the file while DuckDB writes it: its COPY writers only append, so
	// the bytes read behind the writer are final. The total is checked
	// against the finished file's size.
	done := make(chan struct{})
	hashed := make(chan tailResult, 1)
	go func() {
		hashed <- tailSHA256(tmpName, done, func(n int64) { progress.Count(label, n, -1) })
	}()
	r, err := q.ExecContext(ctx, "COPY ("+query+") TO "+job.SQLString(tmpName)+" "+copyOptions(format))
	close(done)
	th := <-hashed
	if err != nil {
		return 0, "", 0, fmt.Errorf("export to %s: %w", out, catalog.TrimSQLError(err))
	}
	rows, _ := r.RowsAffected()
	sum, size := th.sum, th.size
	if st, serr := os.Stat(tmpName); th.err != nil || serr != nil || st.Size() != size {
		if sum, size, err = source.FileSHA256(tmpName); err != nil {
			return 0, "", 0, fmt.Errorf("export to %s: %w", out, err)
		}
	}
	if fault != nil {
		fault(FaultExportBeforeSwap)
	}
	if err := os.Rename(tmpName, out); err != nil {
		return 0, "", 0, fmt.Errorf("export to %s: %w", out, err)
	}
	return rows, sum, size, nil
}

type tailResult struct {
	sum  string
	size int64
	err  error
}

// tailSHA256 hashes the file at path as another writer creates and appends
// to it, until done is closed; then it hashes what remains to the end.
// read is told the bytes hashed so far.
func tailSHA256(path string, done <-chan struct{}, read func(int64)) tailResult {
	var f *os.File
	for f == nil {
		var err error
		f, err = os.Open(path)
		if err == nil {
			break
		}
		select {
		case <-done:
			if f, err = os.Open(path); err != nil {
				return tailResult{err: err}
			}
		case <-time.After(2 * time.Millisecond):
		}
	}
	defer f.Close()
	h := sha256.New()
	buf := make([]byte, 1<<20)
	var n int64
	finished := false
	for {
		k, err := f.Read(buf)
		if k > 0 {
			h.Write(buf[:k])
			n += int64(k)
			read(n)
			continue
		}
		if err != nil && err != io.EOF {
			return tailResult{err: err}
		}
		if finished {
			return tailResult{sum: hex.EncodeToString(h.Sum(nil)), size: n}
		}
		select {
		case <-done:
			finished = true // one more pass reads what the writer flushed last
		case <-time.After(2 * time.Millisecond):
		}
	}
}

// ManifestName is the file a partitioned export writes beside its parts.
const ManifestName = "manifest.json"

// nullPartition is the value part of the NULL partition's folder name,
// Hive's. partitionDir never gives it to a value.
const nullPartition = "__HIVE_DEFAULT_PARTITION__"

// maxPartitionDir bounds a partition's folder name, well within the 255
// bytes a file name may take.
const maxPartitionDir = 200

// partitionDir is a partition's folder name, hive style: COL=VALUE with the
// column name and the value percent-escaped (every byte but A-Z a-z 0-9 -
// _ . is written %XX, so url.PathUnescape reads it back). NULL is
// COL=__HIVE_DEFAULT_PARTITION__, and the strings "__HIVE_DEFAULT_PARTITION__"
// and "NULL" (any case) are written with their first byte escaped, so no
// value takes NULL's name and DuckDB's hive_partitioning reads each value
// back. Distinct values give distinct names: each name unescapes to its
// value. A name longer than maxPartitionDir keeps its first 120 bytes and
// ends in ~ and the sha256 of the whole name: no short name holds a ~ (it is
// escaped), so a long name cannot meet a short one, and the manifest
// records the value itself.
func partitionDir(col string, value *string) string {
	v := nullPartition
	if value != nil {
		v = escapePartition(*value)
		// Readers (DuckDB's hive_partitioning among them) take these names
		// for NULL before they unescape, so the string is written with its
		// first byte escaped.
		if v == nullPartition || strings.EqualFold(v, "NULL") {
			v = fmt.Sprintf("%%%02X", v[0]) + v[1:]
		}
	}
	name := escapePartition(col) + "=" + v
	if len(name) <= maxPartitionDir {
		return name
	}
	sum := sha256.Sum256([]byte(name))
	cut := 120
	// Cut before an escape, never inside one.
	if name[cut-1] == '%' {
		cut--
	} else if name[cut-2] == '%' {
		cut -= 2
	}
	return name[:cut] + "~" + hex.EncodeToString(sum[:])
}

// escapePartition percent-escapes every byte of s but A-Z a-z 0-9 - _ .
func escapePartition(s string) string {
	const hexDigits = "0123456789ABCDEF"
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_' || c == '.' {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(hexDigits[c>>4])
		b.WriteByte(hexDigits[c&15])
	}
	return b.String()
}

// exportPartitioned writes every partition and the manifest into a fresh
// temporary folder beside opts.Out, then swaps it into place (swapDir).
func exportPartitioned(ctx context.Context, q catalog.Querier, j *job.Job, src *tableSource, opts ExportOptions, res *ExportResult, fault func(string)) error {
	col := opts.PartitionBy
	if !slices.Contains(src.columns, col) {
		return job.Usage("--partition-by %s: table %s has no such column (columns: %s)", col, src.table, strings.Join(src.columns, ", "))
	}
	out := opts.Out
	// A symlinked export folder keeps its link: the swap happens where it
	// points.
	if st, err := os.Lstat(out); err == nil && st.Mode()&os.ModeSymlink != 0 {
		if out, err = filepath.EvalSymlinks(out); err != nil {
			return fmt.Errorf("export to %s: %w", opts.Out, err)
		}
	}
	if err := cleanExportTemps(out); err != nil {
		return err
	}
	if err := checkExportDir(out); err != nil {
		return err
	}
	tmp, err := exportTempName(out)
	if err != nil {
		return err
	}
	if err := os.Mkdir(tmp, 0o755); err != nil {
		return fmt.Errorf("export to %s: %w", opts.Out, err)
	}
	defer os.RemoveAll(tmp)
	key := src.key
	if len(j.Pipeline.Key) > 0 && containsAll(src.columns, j.Pipeline.Key) {
		key = j.Pipeline.Key
	}
	keyExpr := job.QuoteIdent(key[0])
	if len(key) > 1 {
		keyExpr = "row(" + identList(key) + ")"
	}
	qc := job.QuoteIdent(col)
	colType := src.types[slices.Index(src.columns, col)]
	// One pass for the manifest's figures, in partition order.
	rows, err := q.QueryContext(ctx, "SELECT CAST("+qc+" AS VARCHAR), count(*), count(DISTINCT "+keyExpr+"), CAST(min("+qc+") AS VARCHAR), CAST(max("+qc+") AS VARCHAR) FROM ("+src.query+") GROUP BY "+qc+" ORDER BY "+qc+" NULLS LAST")
	if err != nil {
		return fmt.Errorf("export %s: partitions: %w", src.table, catalog.TrimSQLError(err))
	}
	var files []ManifestFile
	seen := map[string]bool{}
	for rows.Next() {
		var f ManifestFile
		var value, lo, hi *string
		if err := rows.Scan(&value, &f.Rows, &f.DistinctKeys, &lo, &hi); err != nil {
			rows.Close()
			return err
		}
		f.Value, f.Min, f.Max = value, lo, hi
		f.Path = partitionDir(col, value) + "/data." + extension(res.Format)
		// Two partitions in one file would leave the manifest naming a
		// file that holds only the second: refuse rather than write it.
		if seen[f.Path] {
			rows.Close()
			return fmt.Errorf("export %s: two values of %s give the partition %s", src.table, col, f.Path)
		}
		seen[f.Path] = true
		files = append(files, f)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("export %s: partitions: %w", src.table, catalog.TrimSQLError(err))
	}
	for i := range files {
		f := &files[i]
		// A typed literal keeps the filter a plain comparison that DuckDB
		// pushes into the scan.
		where := " WHERE " + qc + " IS NULL"
		if f.Value != nil {
			where = " WHERE " + qc + " = CAST(" + job.SQLString(*f.Value) + " AS " + colType + ")"
		}
		path := filepath.Join(tmp, filepath.FromSlash(f.Path))
		if err := os.Mkdir(filepath.Dir(path), 0o755); err != nil {
			return fmt.Errorf("export to %s: %w", opts.Out, err)
		}
		n, sum, size, err := copyTo(ctx, q, "SELECT * FROM ("+src.query+")"+where+src.orderBy(), path, res.Format, f.Path, opts.Progress, nil)
		if err != nil {
			return err
		}
		if n != f.Rows {
			return fmt.Errorf("export %s: partition %s wrote %d rows, expected %d", src.table, f.Path, n, f.Rows)
		}
		f.SHA256, f.Bytes = sum, size
		res.Rows += n
		res.Bytes += size
		fault(fmt.Sprintf("%s%d", FaultExportPart, i+1))
	}
	m := Manifest{Job: j.Name, Table: src.table, Snapshot: src.snapshot, Format: res.Format, PartitionBy: col,
		Key: key, Rows: res.Rows, Files: files}
	if m.Files == nil {
		m.Files = []ManifestFile{}
	}
	data := append(job.CanonicalJSON(m), '\n')
	if err := os.WriteFile(filepath.Join(tmp, ManifestName), data, 0o644); err != nil {
		return fmt.Errorf("export to %s: manifest: %w", opts.Out, err)
	}
	if err := swapDir(tmp, out, exchangePaths, fault); err != nil {
		return err
	}
	sum := sha256.Sum256(data)
	res.SHA256 = hex.EncodeToString(sum[:])
	res.PartitionBy = col
	res.Files = m.Files
	return nil
}

// checkExportDir refuses an out that a partitioned export may not replace:
// a file, or a folder that is neither empty nor a previous export (its
// manifest.json and partition folders).
func checkExportDir(out string) error {
	st, err := os.Stat(out)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("export to %s: %w", out, err)
	}
	if !st.IsDir() {
		return job.Usage("export to %s: is a file; --partition-by writes a folder", out)
	}
	entries, err := os.ReadDir(out)
	if err != nil {
		return fmt.Errorf("export to %s: %w", out, err)
	}
	if len(entries) == 0 {
		return nil
	}
	if _, err := os.Stat(filepath.Join(out, ManifestName)); err != nil {
		return job.Usage("export to %s: folder is not empty and holds no previous export (%s)", out, ManifestName)
	}
	for _, e := range entries {
		if e.Name() == ManifestName || (e.IsDir() && strings.ContainsAny(e.Name(), "=~")) {
			continue
		}
		return job.Usage("export to %s: folder holds %s, which is not part of a previous export", out, e.Name())
	}
	return nil
}

func containsAll(have, want []string) bool {
	for _, w := range want {
		if !slices.Contains(have, w) {
			return false
		}
	}
	return true
}
