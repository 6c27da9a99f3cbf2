// The Parquet files of a published snapshot: written by DuckDB with
// Iceberg field ids, listed, and the partitions they replace.

package publisher

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"
	"github.com/google/uuid"
	"github.com/idem-dev/idem/runner"
)

// currentFiles are the data files of tbl's current snapshot.
func currentFiles(ctx context.Context, tbl *table.Table) ([]string, error) {
	if tbl.CurrentSnapshot() == nil {
		return nil, nil
	}
	tasks, err := tbl.Scan().PlanFiles(ctx)
	if err != nil {
		return nil, fmt.Errorf("list the data files of %s: %w", strings.Join(tbl.Identifier(), "."), err)
	}
	out := make([]string, 0, len(tasks))
	seen := map[string]bool{}
	for _, t := range tasks {
		if f := t.File.FilePath(); !seen[f] {
			seen[f] = true
			out = append(out, f)
		}
	}
	sort.Strings(out)
	return out, nil
}

// localPath is the file path of a file:// location.
func localPath(loc string) string {
	if u, err := url.Parse(loc); err == nil && u.Scheme == "file" {
		return u.Path
	}
	return loc
}

// fileURL is the file:// URL of a local path, escaped: DuckDB names a
// partition's folder with its value escaped (a space as %20), which a
// URL must carry as %2520 to name the folder.
func fileURL(path string) string {
	return (&url.URL{Scheme: "file", Path: filepath.ToSlash(path)}).String()
}

type written struct {
	paths []string
	bytes int64
}

// writeFiles writes snapshot s of the job as Parquet files with Iceberg
// field ids under the table's data folder: one file, or, partitioned, one
// per partition (only those in parts when parts is not nil).
func (p *publisher) writeFiles(ctx context.Context, tbl *table.Table, s int64, cols []column, schema *iceberg.Schema, partitioned bool, parts []string) (*written, error) {
	ids, err := fieldIDs(cols, schema)
	if err != nil {
		return nil, err
	}
	tx, err := p.db.Begin(ctx)
	if err != nil {
		return nil, err
	}
	defer tx.Close()
	read, err := tx.Table(ctx, s)
	if err != nil {
		return nil, err
	}
	sel := make([]string, len(cols))
	for i, c := range cols {
		sel[i] = c.writeSQL()
	}
	query := "SELECT " + strings.Join(sel, ", ") + " FROM (" + read.Query + ")"
	st, err := p.newStaging(tbl)
	if err != nil {
		return nil, err
	}
	defer st.close()
	dataDir := st.dir
	tag := fmt.Sprintf("idem-s%d-%s", s, uuid.NewString())
	opts := "FORMAT parquet, COMPRESSION zstd, FIELD_IDS " + ids
	var target string
	if partitioned {
		if parts != nil {
			if len(parts) == 0 {
				return &written{}, nil
			}
			query += " WHERE " + partValueSQL(p.j.PartitionBy) + " IN (" + quoteList(parts) + ")"
		}
		target = filepath.Join(dataDir, tag)
		opts += ", PARTITION_BY (" + runner.QuoteIdent(p.j.PartitionBy) + "), WRITE_PARTITION_COLUMNS true, FILENAME_PATTERN 'part_{i}'"
	} else {
		target = filepath.Join(dataDir, tag+".parquet")
	}
	if _, err := tx.Tx().ExecContext(ctx, "COPY ("+query+") TO '"+strings.ReplaceAll(target, "'", "''")+"' ("+opts+")"); err != nil {
		return nil, fmt.Errorf("write snapshot %d of %s as Parquet: %w", s, p.j.Name, runner.TrimSQLError(err))
	}
	return listWritten(ctx, st, target, partitioned)
}

// listWritten places the file or the folder of files DuckDB wrote at
// target in the table (staging.place) and lists them.
func listWritten(ctx context.Context, st *staging, target string, dir bool) (*written, error) {
	w := &written{}
	if !dir {
		info, err := os.Stat(target)
		if err != nil {
			return nil, err
		}
		u, err := st.place(ctx, target)
		if err != nil {
			return nil, err
		}
		w.paths, w.bytes = []string{u}, info.Size()
		return w, nil
	}
	err := filepath.WalkDir(target, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			if os.IsNotExist(err) && path == target {
				return filepath.SkipDir // no rows: no files
			}
			return err
		}
		if d.IsDir() || !strings.HasSuffix(path, ".parquet") {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		u, err := st.place(ctx, path)
		if err != nil {
			return err
		}
		w.paths = append(w.paths, u)
		w.bytes += info.Size()
		return nil
	})
	sort.Strings(w.paths)
	return w, err
}

// partValueSQL is a partition's value as text, NULL included ('=' and
// the value, or NULL), as changedPartitions and writeFiles compare it.
func partValueSQL(col string) string {
	return "coalesce('=' || CAST(" + runner.QuoteIdent(col) + " AS VARCHAR), 'NULL')"
}

// partName is a partition's value as partValueSQL gives it, for people.
func partName(v string) string {
	if s, ok := strings.CutPrefix(v, "="); ok {
		return s
	}
	return "NULL"
}

func quoteList(vs []string) string {
	q := make([]string, len(vs))
	for i, v := range vs {
		q[i] = "'" + strings.ReplaceAll(v, "'", "''") + "'"
	}
	return strings.Join(q, ", ")
}

// changedPartitions compares, partition by partition, idem snapshots s and
// prev (the one the table holds): a partition whose rows differ (count and
// a sum of row hashes) is replaced. It returns those partitions and the
// table's current files that hold them.
func (p *publisher) changedPartitions(ctx context.Context, s, prev int64, current []string) (parts, remove []string, err error) {
	tx, err := p.db.Begin(ctx)
	if err != nil {
		return nil, nil, err
	}
	defer tx.Close()
	finger := func(snapshot int64) (map[string]string, error) {
		read, err := tx.Table(ctx, snapshot)
		if err != nil {
			return nil, err
		}
		names := make([]string, len(read.Columns))
		for i, c := range read.Columns {
			names[i] = runner.QuoteIdent(c.Name)
		}
		rows, err := tx.Tx().QueryContext(ctx, "SELECT "+partValueSQL(p.j.PartitionBy)+", count(*), CAST(sum(CAST(hash("+strings.Join(names, ", ")+") AS HUGEINT)) AS VARCHAR) FROM ("+read.Query+") GROUP BY ALL")
		if err != nil {
			return nil, runner.TrimSQLError(err)
		}
		defer rows.Close()
		out := map[string]string{}
		for rows.Next() {
			var v, sum string
			var n int64
			if err := rows.Scan(&v, &n, &sum); err != nil {
				return nil, err
			}
			out[v] = fmt.Sprintf("%d:%s", n, sum)
		}
		return out, rows.Err()
	}
	now, err := finger(s)
	if err != nil {
		return nil, nil, err
	}
	before, err := finger(prev)
	if err != nil {
		return nil, nil, err
	}
	changed := map[string]bool{}
	for v, f := range now {
		if before[v] != f {
			changed[v] = true
		}
	}
	for v := range before {
		if _, ok := now[v]; !ok {
			changed[v] = true
		}
	}
	parts = []string{}
	for v := range changed {
		parts = append(parts, v)
	}

	sort.Strings(parts)
	if len(parts) == 0 || len(current) == 0 {
		return parts, nil, nil
	}
	// The partition each current file holds, read from the file itself.
	local := make([]string, len(current))
	for i, f := range current {
		local[i] = localPath(f)
	}
	rows, err := tx.Tx().QueryContext(ctx, "SELECT DISTINCT filename, "+partValueSQL(p.j.PartitionBy)+" FROM read_parquet(["+quoteList(local)+"], filename = true)")
	if err != nil {
		return nil, nil, fmt.Errorf("read the partitions of the published files of %s: %w", p.j.Name, runner.TrimSQLError(err))
	}
	defer rows.Close()
	byLocal := map[string]string{}
	for i, f := range current {
		byLocal[local[i]] = f
	}
	seen := map[string]bool{}
	for rows.Next() {
		var file, v string
		if err := rows.Scan(&file, &v); err != nil {
			return nil, nil, err
		}
		if changed[v] && !seen[file] {
			seen[file] = true
			remove = append(remove, byLocal[file])
		}
	}
	sort.Strings(remove)
	return parts, remove, rows.Err()
}
