package main

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
)

// The project case's floor: the project's SQL run plainly in one DuckDB
// process on DuckDB's default threads, in one transaction, then a
// CHECKPOINT. The raw tables hold the declared columns; a files source
// keeps, per key, the row of its highest ordering value (or the latest
// file's row without one), as merge_by_key does; a reference table is the
// file. Every model is CREATE OR REPLACE TABLE name AS its SELECT, with
// {{upstream:NAME}} read as the table NAME. floor_files lists the landing
// files loaded.
//
//	full     every landing file and reference file, then every model
//	nightly  the landing files not in floor_files, merged in; the
//	         reference files reloaded; every model rebuilt
//	noop     the landing files not in floor_files: none, nothing written
func projectFloor(ctx context.Context, conn *sql.Conn, dir, phase string) error {
	var loaded []string
	if phase != "full" {
		rows, err := conn.QueryContext(ctx, "SELECT path FROM floor_files")
		if err != nil {
			return err
		}
		for rows.Next() {
			var p string
			if err := rows.Scan(&p); err != nil {
				rows.Close()
				return err
			}
			loaded = append(loaded, p)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
	}
	newFiles := map[string][]string{}
	var count int
	for _, s := range projSources {
		if !s.files {
			continue
		}
		all, err := filepath.Glob(filepath.Join(dir, s.path))
		if err != nil {
			return err
		}
		for _, f := range all {
			if !slices.Contains(loaded, f) {
				newFiles[s.name] = append(newFiles[s.name], f)
				count++
			}
		}
	}
	if phase == "noop" {
		if count > 0 {
			return fmt.Errorf("noop: %d new landing files", count)
		}
		return nil
	}
	var script strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&script, format+";\n", args...) }
	w("BEGIN")
	if phase == "full" {
		w("CREATE TABLE floor_files (path VARCHAR)")
	}
	for _, s := range projSources {
		cols := make([]string, len(s.columns))
		types := make([]string, len(s.columns))
		for i, c := range s.columns {
			cols[i] = c[0]
			types[i] = fmt.Sprintf("'%s': '%s'", c[0], c[1])
		}
		list := strings.Join(cols, ", ")
		read := func(files []string) string {
			q := make([]string, len(files))
			for i, f := range files {
				q[i] = quote(f)
			}
			return fmt.Sprintf("read_csv([%s], header = true, auto_detect = false, columns = {%s}, filename = true)", strings.Join(q, ", "), strings.Join(types, ", "))
		}
		key := strings.Join(s.key, ", ")
		order := "filename DESC"
		if s.orderBy != "" {
			order = s.orderBy + " DESC"
		}
		switch {
		case !s.files:
			w("CREATE OR REPLACE TABLE %s AS SELECT %s FROM %s", s.name, list, read([]string{filepath.Join(dir, s.path)}))
		case phase == "full":
			w("CREATE TABLE %s AS SELECT %s FROM %s QUALIFY row_number() OVER (PARTITION BY %s ORDER BY %s) = 1", s.name, list, read(newFiles[s.name]), key, order)
		case len(newFiles[s.name]) > 0:
			// The new rows that win: one per key, above the stored
			// ordering value (any, without an ordering column).
			w("CREATE OR REPLACE TEMP TABLE incoming AS SELECT %s FROM %s QUALIFY row_number() OVER (PARTITION BY %s ORDER BY %s) = 1", list, read(newFiles[s.name]), key, order)
			on := make([]string, len(s.key))
			for i, k := range s.key {
				on[i] = fmt.Sprintf("r.%s = n.%s", k, k)
			}
			wins := "true"
			if s.orderBy != "" {
				wins = fmt.Sprintf("r.%s IS NULL OR n.%s > r.%s", s.key[0], s.orderBy, s.orderBy)
			}
			w("CREATE OR REPLACE TEMP TABLE wins AS SELECT n.* FROM incoming AS n LEFT JOIN %s AS r ON %s WHERE %s", s.name, strings.Join(on, " AND "), wins)
			w("DELETE FROM %s WHERE (%s) IN (SELECT (%s) FROM wins)", s.name, key, key)
			w("INSERT INTO %s SELECT * FROM wins", s.name)
		}
		for _, f := range newFiles[s.name] {
			w("INSERT INTO floor_files VALUES (%s)", quote(f))
		}
	}
	for _, m := range projModelList {
		text, _, err := modelSQL(m.name)
		if err != nil {
			return err
		}
		w("CREATE OR REPLACE TABLE %s AS\n%s", m.name, upstreamRef.ReplaceAllString(strings.TrimSpace(text), "$1"))
	}
	w("COMMIT")
	w("CHECKPOINT")
	_, err := conn.ExecContext(ctx, script.String())
	return err
}
