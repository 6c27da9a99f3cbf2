package export

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/idem-dev/idem/internal/catalog"
	"github.com/idem-dev/idem/internal/job"
	"github.com/idem-dev/idem/internal/jobkey"
	"github.com/idem-dev/idem/internal/report"
	"github.com/idem-dev/idem/internal/sqltext"
)

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
func exportPartitioned(ctx context.Context, q catalog.Querier, j *job.Job, src *TableSource, opts Options, res *Result, fault func(string)) error {
	col := opts.PartitionBy
	if !slices.Contains(src.Columns, col) {
		return report.Usage("--partition-by %s: table %s has no such column (columns: %s)", col, src.Table, strings.Join(src.Columns, ", "))
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
	key := src.Key
	if len(j.Pipeline.Key) > 0 && containsAll(src.Columns, j.Pipeline.Key) {
		key = j.Pipeline.Key
	}
	keyExpr := sqltext.QuoteIdent(key[0])
	if len(key) > 1 {
		keyExpr = "row(" + IdentList(key) + ")"
	}
	qc := sqltext.QuoteIdent(col)
	colType := src.Types[slices.Index(src.Columns, col)]
	// One pass for the manifest's figures, in partition order.
	rows, err := q.QueryContext(ctx, "SELECT CAST("+qc+" AS VARCHAR), count(*), count(DISTINCT "+keyExpr+"), CAST(min("+qc+") AS VARCHAR), CAST(max("+qc+") AS VARCHAR) FROM ("+src.Query+") GROUP BY "+qc+" ORDER BY "+qc+" NULLS LAST")
	if err != nil {
		return fmt.Errorf("export %s: partitions: %w", src.Table, catalog.TrimSQLError(err))
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
			return fmt.Errorf("export %s: two values of %s give the partition %s", src.Table, col, f.Path)
		}
		seen[f.Path] = true
		files = append(files, f)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("export %s: partitions: %w", src.Table, catalog.TrimSQLError(err))
	}
	for i := range files {
		f := &files[i]
		// A typed literal keeps the filter a plain comparison that DuckDB
		// pushes into the scan.
		where := " WHERE " + qc + " IS NULL"
		if f.Value != nil {
			where = " WHERE " + qc + " = CAST(" + sqltext.SQLString(*f.Value) + " AS " + colType + ")"
		}
		path := filepath.Join(tmp, filepath.FromSlash(f.Path))
		if err := os.Mkdir(filepath.Dir(path), 0o755); err != nil {
			return fmt.Errorf("export to %s: %w", opts.Out, err)
		}
		n, sum, size, err := CopyTo(ctx, q, "SELECT * FROM ("+src.Query+")"+where+src.orderBy(), path, res.Format, f.Path, opts.Progress, nil)
		if err != nil {
			return err
		}
		if n != f.Rows {
			return fmt.Errorf("export %s: partition %s wrote %d rows, expected %d", src.Table, f.Path, n, f.Rows)
		}
		f.SHA256, f.Bytes = sum, size
		res.Rows += n
		res.Bytes += size
		fault(fmt.Sprintf("%s%d", FaultExportPart, i+1))
	}
	m := Manifest{Job: j.Name, Table: src.Table, Snapshot: src.Snapshot, Format: res.Format, PartitionBy: col,
		Key: key, Rows: res.Rows, Files: files}
	if m.Files == nil {
		m.Files = []ManifestFile{}
	}
	data := append(jobkey.CanonicalJSON(m), '\n')
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
		return report.Usage("export to %s: is a file; --partition-by writes a folder", out)
	}
	entries, err := os.ReadDir(out)
	if err != nil {
		return fmt.Errorf("export to %s: %w", out, err)
	}
	if len(entries) == 0 {
		return nil
	}
	if _, err := os.Stat(filepath.Join(out, ManifestName)); err != nil {
		return report.Usage("export to %s: folder is not empty and holds no previous export (%s)", out, ManifestName)
	}
	for _, e := range entries {
		if e.Name() == ManifestName || (e.IsDir() && strings.ContainsAny(e.Name(), "=~")) {
			continue
		}
		return report.Usage("export to %s: folder holds %s, which is not part of a previous export", out, e.Name())
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
