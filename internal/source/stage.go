package source

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/csv"
	"fmt"
	"os"
	"strings"

	"github.com/idem-dev/idem/internal/job"
	"github.com/idem-dev/idem/internal/jobfs"
	"github.com/idem-dev/idem/internal/report"
	"github.com/idem-dev/idem/internal/sqltext"
)

// stageInput defines the temp view "input" over the retained files: the
// declared columns, read as text for csv and jsonl (the stage step types and
// validates them) and as stored for parquet. Column names are checked here so
// that a missing or unexpected column names the file.
//
// With ignoreExtra, columns (CSV, Parquet) and fields (JSON Lines) that the
// pipeline does not read are skipped, and returned as "file: column";
// otherwise the first one is an error naming the file and the column.
func stageInput(ctx context.Context, tx *sql.Tx, files []InputFile, format string, columns []string, ignoreExtra, checked bool) ([]string, error) {
	s := &stager{columns: columns, ignoreExtra: ignoreExtra, checked: checked}
	var paths []string
	for _, f := range files {
		if f.Size > 0 {
			paths = append(paths, f.Retained)
		}
	}
	selectList := make([]string, len(columns))
	for i, c := range columns {
		selectList[i] = sqltext.QuoteIdent(c)
	}
	if len(paths) == 0 {
		empty := make([]string, len(columns))
		for i, c := range columns {
			empty[i] = "CAST(NULL AS VARCHAR) AS " + sqltext.QuoteIdent(c)
		}
		_, err := tx.ExecContext(ctx, "CREATE OR REPLACE TEMP VIEW input AS SELECT "+strings.Join(empty, ", ")+" WHERE false")
		return nil, err
	}
	if _, err := tx.ExecContext(ctx, "SET VARIABLE idem_input = ?", paths); err != nil {
		return nil, fmt.Errorf("bind input paths: %w", err)
	}
	var reader string
	var err error
	switch format {
	case job.FormatCSV:
		reader, err = s.csvReader(files)
	case job.FormatJSONL:
		reader, err = s.jsonlReader(ctx, tx, files)
	case job.FormatParquet:
		reader, err = s.parquetReader(ctx, tx, files)
	default:
		return nil, report.Usage("unknown input format %q", format)
	}
	if err != nil {
		return nil, err
	}
	_, err = tx.ExecContext(ctx, "CREATE OR REPLACE TEMP VIEW input AS SELECT "+strings.Join(selectList, ", ")+" FROM "+reader)
	if err != nil {
		return nil, ReadError(err, files, format)
	}
	return s.ignored, nil
}

// stager collects, while the readers of an input are built, the input
// columns that [input] extra_columns = "ignore" skips.
type stager struct {
	columns     []string
	ignoreExtra bool
	// checked says every record's fields were checked already (a stream
	// batch, checkRecord): a JSONL file is not scanned for extra fields.
	checked bool
	ignored []string
}

// check compares a file's columns with the pipeline's.
func (s *stager) check(path string, have []string) error {
	extra, err := checkColumns(path, have, s.columns, s.ignoreExtra)
	for _, c := range extra {
		s.ignored = append(s.ignored, path+": "+c)
	}
	return err
}

// csvReader checks that every CSV file has the first one's header and
// returns the reader of them all.
func (s *stager) csvReader(files []InputFile) (string, error) {
	var header []string
	for _, f := range files {
		if f.Size == 0 {
			continue
		}
		h, err := csvHeader(f)
		if err != nil {
			return "", err
		}
		if err := s.check(f.Path, h); err != nil {
			return "", err
		}
		if header != nil && !jobfs.EqualKeys(header, h) {
			return "", fmt.Errorf("input %s: header %s differs from the first file's %s", f.Path, strings.Join(h, ","), strings.Join(header, ","))
		}
		header = h
	}
	cols := make([]string, len(header))
	for i, c := range header {
		cols[i] = sqltext.SQLString(c) + ": 'VARCHAR'"
	}
	// An unquoted empty field is NULL and a quoted one ("") the empty
	// string, as in PostgreSQL's COPY ... CSV, so a CSV batch can carry
	// every value a JSON Lines batch can.
	return "read_csv(getvariable('idem_input'), header = true, auto_detect = false, delim = ',', quote = '\"', escape = '\"', strict_mode = true, allow_quoted_nulls = false, columns = {" + strings.Join(cols, ", ") + "})", nil
}

// jsonlReader refuses (or, ignoring extra columns, notes) a field the
// pipeline does not read and returns the reader of the JSON Lines files.
func (s *stager) jsonlReader(ctx context.Context, tx *sql.Tx, files []InputFile) (string, error) {
	cols := make([]string, len(s.columns))
	for i, c := range s.columns {
		cols[i] = sqltext.SQLString(c) + ": 'VARCHAR'"
	}
	// The first unexpected field refuses the input; ignored ones are
	// all named (one per file and field, in file then field order).
	reader := "read_json(getvariable('idem_input'), format = 'newline_delimited', maximum_object_size = " + maxJSONObject + ", columns = {" + strings.Join(cols, ", ") + "})"
	if s.checked && !s.ignoreExtra {
		return reader, nil
	}
	// Plain objects of known fields only (the common file) are proven in
	// Go, without DuckDB's scan of every object; anything else is left to
	// it, which names what it finds.
	known := map[string]bool{}
	for _, c := range s.columns {
		known[c] = true
	}
	proven := true
	for _, f := range files {
		if f.Size > 0 && !jsonFieldsKnown(f.Retained, known) {
			proven = false
			break
		}
	}
	if proven {
		return reader, nil
	}
	rows, err := tx.QueryContext(ctx, extraFieldsQuery(s.ignoreExtra), s.columns)
	if err != nil {
		return "", ReadError(err, files, job.FormatJSONL)
	}
	for rows.Next() {
		var k, file string
		if err := rows.Scan(&k, &file); err != nil {
			rows.Close()
			return "", err
		}
		if !s.ignoreExtra {
			rows.Close()
			return "", fmt.Errorf("input %s: unexpected field %q (the pipeline reads %s; [input] extra_columns = \"ignore\" skips it)", originalPath(files, file), k, strings.Join(s.columns, ", "))
		}
		s.ignored = append(s.ignored, originalPath(files, file)+": "+k)
	}
	if err := rows.Close(); err != nil {
		return "", ReadError(err, files, job.FormatJSONL)
	}
	if err := rows.Err(); err != nil {
		return "", ReadError(err, files, job.FormatJSONL)
	}
	return reader, nil
}

// extraFieldsQuery lists the top-level fields of the JSON Lines files of
// variable idem_input that are not in the bound list of columns, with
// their file: the first one, or with ignoreExtra every one once, in file
// then field order.
func extraFieldsQuery(ignoreExtra bool) string {
	limit := "LIMIT 1"
	if ignoreExtra {
		limit = "GROUP BY ALL ORDER BY filename, k"
	}
	return `
		SELECT k, filename FROM (
			SELECT unnest(json_keys(json)) AS k, filename
			FROM read_ndjson_objects(getvariable('idem_input'), filename = true, maximum_object_size = ` + maxJSONObject + `)
		) WHERE k NOT IN (SELECT unnest(?::VARCHAR[])) ` + limit
}

// parquetReader checks each Parquet file's columns and returns their
// reader.
func (s *stager) parquetReader(ctx context.Context, tx *sql.Tx, files []InputFile) (string, error) {
	for _, f := range files {
		if f.Size == 0 {
			continue
		}
		rows, err := tx.QueryContext(ctx, "SELECT name FROM parquet_schema(?) WHERE name <> 'schema' AND num_children IS NULL OR num_children = 0", f.Retained)
		if err != nil {
			return "", ReadError(err, files, job.FormatParquet)
		}
		var names []string
		for rows.Next() {
			var n string
			if err := rows.Scan(&n); err != nil {
				rows.Close()
				return "", err
			}
			names = append(names, n)
		}
		rows.Close()
		if err := s.check(f.Path, names); err != nil {
			return "", err
		}
	}
	return "read_parquet(getvariable('idem_input'))", nil
}

// checkColumns checks a file's columns against the ones the pipeline reads:
// each must be there once. A column it does not read is an error, or with
// ignoreExtra one of the returned extra columns.
func checkColumns(path string, have, want []string, ignoreExtra bool) (extra []string, err error) {
	wantSet := map[string]bool{}
	for _, c := range want {
		wantSet[c] = true
	}
	haveSet := map[string]bool{}
	for _, c := range have {
		if haveSet[c] {
			return nil, fmt.Errorf("input %s: column %q appears twice", path, c)
		}
		haveSet[c] = true
		if !wantSet[c] {
			if !ignoreExtra {
				return nil, fmt.Errorf("input %s: unexpected column %q (the pipeline reads %s; [input] extra_columns = \"ignore\" skips it)", path, c, strings.Join(want, ", "))
			}
			extra = append(extra, c)
		}
	}
	for _, c := range want {
		if !haveSet[c] {
			return nil, fmt.Errorf("input %s: missing column %q (the pipeline reads %s)", path, c, strings.Join(want, ", "))
		}
	}
	return extra, nil
}

// csvHeader reads the header record of a CSV file.
func csvHeader(f InputFile) ([]string, error) {
	in, err := os.Open(f.Retained)
	if err != nil {
		return nil, fmt.Errorf("input %s: %w", f.Path, err)
	}
	defer in.Close()
	r := csv.NewReader(bufio.NewReader(in))
	r.FieldsPerRecord = -1
	rec, err := r.Read()
	if err != nil {
		return nil, fmt.Errorf("input %s: line 1: cannot read the CSV header: %v", f.Path, err)
	}
	if len(rec) > 0 {
		rec[0] = strings.TrimPrefix(rec[0], "\ufeff")
	}
	for i := range rec {
		rec[i] = strings.TrimSpace(rec[i])
	}
	return rec, nil
}

func originalPath(files []InputFile, retained string) string {
	for _, f := range files {
		if f.Retained == retained {
			return f.Path
		}
	}
	return retained
}
