package source

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/csv"
	"fmt"
	"os"
	"strings"

	"github.com/idem-dev/idem/runner/job"
)

// stageInput defines the temp view "input" over the retained files: the
// declared columns, read as text for csv and jsonl (the stage step types and
// validates them) and as stored for parquet. Column names are checked here so
// that a missing or unexpected column names the file.
//
// With ignoreExtra, columns (CSV, Parquet) and fields (JSON Lines) that the
// pipeline does not read are skipped, and returned as "file: column";
// otherwise the first one is an error naming the file and the column.
func stageInput(ctx context.Context, tx *sql.Tx, files []InputFile, format string, columns []string, ignoreExtra bool) ([]string, error) {
	var ignored []string
	check := func(path string, have []string) error {
		extra, err := checkColumns(path, have, columns, ignoreExtra)
		for _, c := range extra {
			ignored = append(ignored, path+": "+c)
		}
		return err
	}
	var paths []string
	for _, f := range files {
		if f.Size > 0 {
			paths = append(paths, f.Retained)
		}
	}
	selectList := make([]string, len(columns))
	for i, c := range columns {
		selectList[i] = job.QuoteIdent(c)
	}
	if len(paths) == 0 {
		empty := make([]string, len(columns))
		for i, c := range columns {
			empty[i] = "CAST(NULL AS VARCHAR) AS " + job.QuoteIdent(c)
		}
		_, err := tx.ExecContext(ctx, "CREATE OR REPLACE TEMP VIEW input AS SELECT "+strings.Join(empty, ", ")+" WHERE false")
		return nil, err
	}
	if _, err := tx.ExecContext(ctx, "SET VARIABLE idem_input = ?", paths); err != nil {
		return nil, fmt.Errorf("bind input paths: %w", err)
	}
	var reader string
	switch format {
	case job.FormatCSV:
		var header []string
		for _, f := range files {
			if f.Size == 0 {
				continue
			}
			h, err := csvHeader(f)
			if err != nil {
				return nil, err
			}
			if err := check(f.Path, h); err != nil {
				return nil, err
			}
			if header != nil && !job.EqualKeys(header, h) {
				return nil, fmt.Errorf("input %s: header %s differs from the first file's %s", f.Path, strings.Join(h, ","), strings.Join(header, ","))
			}
			header = h
		}
		cols := make([]string, len(header))
		for i, c := range header {
			cols[i] = job.SQLString(c) + ": 'VARCHAR'"
		}
		// An unquoted empty field is NULL and a quoted one ("") the empty
		// string, as in PostgreSQL's COPY ... CSV, so a CSV batch can carry
		// every value a JSON Lines batch can.
		reader = "read_csv(getvariable('idem_input'), header = true, auto_detect = false, delim = ',', quote = '\"', escape = '\"', strict_mode = true, allow_quoted_nulls = false, columns = {" + strings.Join(cols, ", ") + "})"
	case job.FormatJSONL:
		cols := make([]string, len(columns))
		for i, c := range columns {
			cols[i] = job.SQLString(c) + ": 'VARCHAR'"
		}
		// The first unexpected field refuses the input; ignored ones are
		// all named (one per file and field, in file then field order).
		limit := "LIMIT 1"
		if ignoreExtra {
			limit = "GROUP BY ALL ORDER BY filename, k"
		}
		rows, err := tx.QueryContext(ctx, `
			SELECT k, filename FROM (
				SELECT unnest(json_keys(json)) AS k, filename
				FROM read_ndjson_objects(getvariable('idem_input'), filename = true, maximum_object_size = `+maxJSONObject+`)
			) WHERE k NOT IN (SELECT unnest(?::VARCHAR[])) `+limit, columns)
		if err != nil {
			return nil, ReadError(err, files, format)
		}
		for rows.Next() {
			var k, file string
			if err := rows.Scan(&k, &file); err != nil {
				rows.Close()
				return nil, err
			}
			if !ignoreExtra {
				rows.Close()
				return nil, fmt.Errorf("input %s: unexpected field %q (the pipeline reads %s; [input] extra_columns = \"ignore\" skips it)", originalPath(files, file), k, strings.Join(columns, ", "))
			}
			ignored = append(ignored, originalPath(files, file)+": "+k)
		}
		if err := rows.Close(); err != nil {
			return nil, ReadError(err, files, format)
		}
		if err := rows.Err(); err != nil {
			return nil, ReadError(err, files, format)
		}
		reader = "read_json(getvariable('idem_input'), format = 'newline_delimited', maximum_object_size = " + maxJSONObject + ", columns = {" + strings.Join(cols, ", ") + "})"
	case job.FormatParquet:
		for _, f := range files {
			if f.Size == 0 {
				continue
			}
			rows, err := tx.QueryContext(ctx, "SELECT name FROM parquet_schema(?) WHERE name <> 'schema' AND num_children IS NULL OR num_children = 0", f.Retained)
			if err != nil {
				return nil, ReadError(err, files, format)
			}
			var names []string
			for rows.Next() {
				var n string
				if err := rows.Scan(&n); err != nil {
					rows.Close()
					return nil, err
				}
				names = append(names, n)
			}
			rows.Close()
			if err := check(f.Path, names); err != nil {
				return nil, err
			}
		}
		reader = "read_parquet(getvariable('idem_input'))"
	default:
		return nil, job.Usage("unknown input format %q", format)
	}
	_, err := tx.ExecContext(ctx, "CREATE OR REPLACE TEMP VIEW input AS SELECT "+strings.Join(selectList, ", ")+" FROM "+reader)
	if err != nil {
		return nil, ReadError(err, files, format)
	}
	return ignored, nil
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
