package export

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/idem-dev/idem/internal/catalog"
	"github.com/idem-dev/idem/internal/job"
	"github.com/idem-dev/idem/internal/report"
	"github.com/idem-dev/idem/internal/run"
	"github.com/idem-dev/idem/internal/sqltext"
)

// AuditResult compares what an audit query reads from a partitioned
// Parquet export with what a full scan of it reads, as DuckDB's profiler
// reports it.
type AuditResult struct {
	Job         string     `json:"job"`
	Export      string     `json:"export"`
	Snapshot    int64      `json:"snapshot"`
	PartitionBy string     `json:"partition_by"`
	Where       string     `json:"where"`
	Audit       ScanFigure `json:"audit"`
	Full        ScanFigure `json:"full_scan"`
	// ByteRatio is Audit.Bytes / Full.Bytes.
	ByteRatio float64 `json:"byte_ratio"`
}

// ScanFigure is one query's reading: Files and FilesTotal from the
// profile's parquet scan ("Total Files Read", "Scanning Files"),
// BytesRead its total_bytes_read, and RowGroups and Bytes the row groups
// and compressed column-chunk bytes of the files it read (parquet_metadata).
type ScanFigure struct {
	Rows       int64 `json:"rows"`
	Files      int64 `json:"files"`
	FilesTotal int64 `json:"files_total"`
	RowGroups  int64 `json:"row_groups"`
	Bytes      int64 `json:"bytes"`
	BytesRead  int64 `json:"bytes_read"`
}

// Audit runs `SELECT * FROM export WHERE where` over the partitioned
// Parquet export in dir (written by idem export --format parquet
// --partition-by COL) and a full scan of it, each with DuckDB's JSON
// profiling, in an in-memory database: the job's database is not opened.
// where is the user's own SQL predicate, as in idem query.
func Audit(ctx context.Context, j *job.Job, dir, where string) (*AuditResult, error) {
	if strings.TrimSpace(where) == "" {
		return nil, report.Usage("--audit needs a predicate, e.g. --audit \"event_day = 47\"")
	}
	data, err := os.ReadFile(filepath.Join(dir, ManifestName))
	if err != nil {
		return nil, report.Usage("--export %s: no %s: audit reads a partitioned export (idem export --format parquet --partition-by COL)", dir, ManifestName)
	}
	var m Manifest
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, fmt.Errorf("audit: %s: %w", ManifestName, err)
	}
	if m.Format != job.FormatParquet {
		return nil, report.Usage("--export %s: is a %s export; audit reads Parquet (--format parquet)", dir, m.Format)
	}
	if m.Job != j.Name {
		return nil, report.Usage("--export %s: is an export of job %s, not %s", dir, m.Job, j.Name)
	}
	if len(m.Files) == 0 {
		return nil, report.Usage("--export %s: holds no partition", dir)
	}
	files := make([]string, len(m.Files))
	for i, f := range m.Files {
		files[i] = filepath.Join(dir, filepath.FromSlash(f.Path))
	}
	db, err := run.OpenMemory(ctx, "?autoinstall_known_extensions=false")
	if err != nil {
		return nil, err
	}
	defer db.Close()
	conn, err := db.Conn(ctx)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	tmp, err := os.MkdirTemp("", "idem-audit-*")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	list := make([]string, len(files))
	for i, f := range files {
		list[i] = sqltext.SQLString(f)
	}
	src := "read_parquet([" + strings.Join(list, ", ") + "], hive_partitioning = true)"
	res := &AuditResult{Job: j.Name, Export: dir, Snapshot: m.Snapshot, PartitionBy: m.PartitionBy, Where: where}
	// The file cache would serve a second read from memory.
	if _, err := conn.ExecContext(ctx, "SET enable_external_file_cache = false"); err != nil {
		return nil, fmt.Errorf("audit: %w", catalog.TrimSQLError(err))
	}
	for _, side := range []struct {
		query string
		out   *ScanFigure
	}{{"SELECT * FROM " + src + " WHERE " + where, &res.Audit}, {"SELECT * FROM " + src, &res.Full}} {
		if err := profileScan(ctx, conn, side.query, filepath.Join(tmp, "profile.json"), side.out); err != nil {
			return nil, err
		}
		read := files
		if side.out == &res.Audit && side.out.Files < int64(len(files)) {
			// The files the scan kept: those of partitions the predicate
			// holds rows of.
			if read, err = matchingFiles(ctx, conn, list, where); err != nil {
				return nil, err
			}
		}
		if err := rowGroups(ctx, conn, read, side.out); err != nil {
			return nil, err
		}
	}
	if res.Full.Bytes > 0 {
		res.ByteRatio = float64(res.Audit.Bytes) / float64(res.Full.Bytes)
	}
	return res, nil
}

// profileScan runs query with JSON profiling into path and reads its
// figures; every column is hashed so the scan reads whole rows.
func profileScan(ctx context.Context, conn *sql.Conn, query, path string, out *ScanFigure) error {
	for _, q := range []string{
		"PRAGMA enable_profiling = 'json'",
		"PRAGMA profiling_output = " + sqltext.SQLString(path),
		// DuckDB 2.0's default metrics hold the bytes read and each
		// operator's extra info (1.5 needed custom_profiling_settings,
		// which 2.0 no longer has).
	} {
		if _, err := conn.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("audit: %w", catalog.TrimSQLError(err))
		}
	}
	var hash any
	err := conn.QueryRowContext(ctx, "SELECT count(*), max(hash(q)) FROM ("+query+") AS q").Scan(&out.Rows, &hash)
	if _, derr := conn.ExecContext(ctx, "PRAGMA disable_profiling"); err == nil && derr != nil {
		err = derr
	}
	if err != nil {
		return fmt.Errorf("audit: %w", catalog.TrimSQLError(err))
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("audit: profile: %w", err)
	}
	var node profileNode
	if err := json.Unmarshal(data, &node); err != nil {
		return fmt.Errorf("audit: profile: %w", err)
	}
	out.BytesRead = node.TotalBytesRead
	if node.IO != nil {
		// DuckDB 2.0: the metrics by group, the plan under "operator".
		out.BytesRead = node.IO.TotalBytesRead
		node.Children = node.Operator
	}
	scan := node.find()
	if scan == nil {
		return errors.New("audit: the profile names no parquet scan")
	}
	out.Files, _ = strconv.ParseInt(scan.ExtraInfo["Total Files Read"], 10, 64)
	if _, total, ok := strings.Cut(scan.ExtraInfo["Scanning Files"], "/"); ok {
		out.FilesTotal, _ = strconv.ParseInt(total, 10, 64)
	} else {
		out.FilesTotal = out.Files
	}
	return nil
}

type profileNode struct {
	TotalBytesRead int64           `json:"total_bytes_read"`
	RawExtra       json.RawMessage `json:"extra_info"`
	Children       []profileNode   `json:"children"`
	// The top of a DuckDB 2.0 profile.
	IO *struct {
		TotalBytesRead int64 `json:"total_bytes_read"`
	} `json:"io"`
	Operator []profileNode `json:"operator"`
}

// find returns the first parquet scan under n.
func (n *profileNode) find() *scanInfo {
	var extra map[string]any
	_ = json.Unmarshal(n.RawExtra, &extra)
	if f, _ := extra["Function"].(string); f == "READ_PARQUET" {
		s := &scanInfo{ExtraInfo: map[string]string{}}
		for k, v := range extra {
			if t, ok := v.(string); ok {
				s.ExtraInfo[k] = t
			}
		}
		return s
	}
	for i := range n.Children {
		if s := n.Children[i].find(); s != nil {
			return s
		}
	}
	return nil
}

type scanInfo struct{ ExtraInfo map[string]string }

// matchingFiles lists the files holding rows the predicate selects.
func matchingFiles(ctx context.Context, conn *sql.Conn, list []string, where string) ([]string, error) {
	rows, err := conn.QueryContext(ctx, "SELECT DISTINCT filename FROM read_parquet(["+strings.Join(list, ", ")+"], hive_partitioning = true, filename = true) WHERE "+where+" ORDER BY filename")
	if err != nil {
		return nil, fmt.Errorf("audit: %w", catalog.TrimSQLError(err))
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var f string
		if err := rows.Scan(&f); err != nil {
			return nil, err
		}
		out = append(out, f)
	}
	return out, rows.Err()
}

// rowGroups sets the row groups and compressed bytes of files.
func rowGroups(ctx context.Context, conn *sql.Conn, files []string, out *ScanFigure) error {
	if len(files) == 0 {
		return nil
	}
	list := make([]string, len(files))
	for i, f := range files {
		list[i] = sqltext.SQLString(f)
	}
	err := conn.QueryRowContext(ctx, "SELECT count(DISTINCT (file_name, row_group_id)), coalesce(sum(total_compressed_size), 0) FROM parquet_metadata(["+strings.Join(list, ", ")+"])").
		Scan(&out.RowGroups, &out.Bytes)
	if err != nil {
		return fmt.Errorf("audit: row groups: %w", catalog.TrimSQLError(err))
	}
	return nil
}
