package lake

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Query is the DuckDB SELECT of columns (names of the scan's schema, in
// that order) over the scan's rows: its data files read by Iceberg field
// id (so a column renamed since a file was written is found, and one added
// since reads NULL), less the rows its delete files delete. A position
// delete removes row pos of file file_path when the data file's sequence
// number is at most the delete file's; an equality delete removes the rows
// whose equality columns equal (NULL equal to NULL) one of its rows when
// the data file's sequence number is lower than the delete file's and the
// delete file is unpartitioned or of the data file's partition.
//
// File paths are quoted into the text (a view cannot hold bound values).
func (sc *Scan) Query(ctx context.Context, st Store, columns []string) (string, error) {
	read := map[int]*Field{} // every field the query reads, by id
	var out []string
	for _, c := range columns {
		f := sc.Schema.Field(c)
		if f == nil {
			return "", fmt.Errorf("iceberg table %s has no column %q", sc.Metadata.TableUUID, c)
		}
		read[f.ID] = f
		out = append(out, quote(c))
	}
	for _, e := range sc.EqDeletes {
		for _, id := range e.EqualityIDs {
			f := sc.Schema.FieldByID(id)
			if f == nil {
				return "", fmt.Errorf("iceberg equality delete file %s deletes by field id %d, which the snapshot's schema does not hold", e.Location, id)
			}
			read[f.ID] = f
		}
	}
	ids := make([]int, 0, len(read))
	for id := range read {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	if len(sc.Data) == 0 {
		empty := make([]string, len(columns))
		for i, c := range columns {
			t, err := sc.Schema.Field(c).DuckDBType()
			if err != nil {
				return "", err
			}
			empty[i] = "CAST(NULL AS " + t + ") AS " + quote(c)
		}
		return "SELECT " + strings.Join(empty, ", ") + " WHERE false", nil
	}
	schemaMap, err := fieldMap(read, ids)
	if err != nil {
		return "", err
	}
	local := func(fs []File) ([]string, error) {
		paths := make([]string, len(fs))
		for i, f := range fs {
			p, err := st.Local(ctx, f.Location)
			if err != nil {
				return nil, err
			}
			paths[i] = p
		}
		return paths, nil
	}
	dataPaths, err := local(sc.Data)
	if err != nil {
		return "", err
	}
	var q strings.Builder
	q.WriteString("WITH idem_d AS (SELECT *, filename AS idem_f, file_row_number AS idem_r FROM read_parquet(" + list(dataPaths) +
		", filename = true, file_row_number = true, schema = " + schemaMap + ")),\n")
	// idem_files: each data file's local path, location, sequence number and partition.
	q.WriteString("idem_files(idem_f, loc, seq, spec, part) AS (VALUES ")
	for i, f := range sc.Data {
		if i > 0 {
			q.WriteString(", ")
		}
		fmt.Fprintf(&q, "(%s, %s, %d, %d, %s)", lit(dataPaths[i]), lit(f.Location), f.Sequence, f.SpecID, lit(f.Partition))
	}
	q.WriteString(")")
	var deleted []string
	if len(sc.PosDeletes) > 0 {
		paths, err := local(sc.PosDeletes)
		if err != nil {
			return "", err
		}
		q.WriteString(",\nidem_pd_files(path, seq) AS (VALUES ")
		for i, f := range sc.PosDeletes {
			if i > 0 {
				q.WriteString(", ")
			}
			fmt.Fprintf(&q, "(%s, %d)", lit(paths[i]), f.Sequence)
		}
		q.WriteString("),\nidem_pd AS (SELECT p.file_path, p.pos, x.seq FROM read_parquet(" + list(paths) + ", filename = true) p JOIN idem_pd_files x ON p.filename = x.path)")
		deleted = append(deleted, "SELECT f.idem_f, pd.pos AS idem_r FROM idem_pd pd JOIN idem_files f ON pd.file_path = f.loc WHERE f.seq <= pd.seq")
	}
	// Equality deletes, one group per set of equality fields.
	groups := map[string][]File{}
	var keys []string
	for _, e := range sc.EqDeletes {
		ids := slices.Clone(e.EqualityIDs)
		slices.Sort(ids)
		k := fmt.Sprint(ids)
		if _, ok := groups[k]; !ok {
			keys = append(keys, k)
		}
		groups[k] = append(groups[k], e)
	}
	slices.Sort(keys)
	for g, k := range keys {
		files := groups[k]
		eqIDs := slices.Clone(files[0].EqualityIDs)
		slices.Sort(eqIDs)
		eqFields := map[int]*Field{}
		for _, id := range eqIDs {
			eqFields[id] = read[id]
		}
		m, err := fieldMap(eqFields, eqIDs)
		if err != nil {
			return "", err
		}
		paths, err := local(files)
		if err != nil {
			return "", err
		}
		name := "idem_ed" + strconv.Itoa(g)
		fmt.Fprintf(&q, ",\n%s_files(path, seq, spec, part, global) AS (VALUES ", name)
		for i, f := range files {
			if i > 0 {
				q.WriteString(", ")
			}
			global := "false"
			if spec := sc.Metadata.Spec(f.SpecID); spec == nil || len(spec.Fields) == 0 {
				global = "true"
			}
			fmt.Fprintf(&q, "(%s, %d, %d, %s, %s)", lit(paths[i]), f.Sequence, f.SpecID, lit(f.Partition), global)
		}
		fmt.Fprintf(&q, "),\n%s AS (SELECT e.*, x.seq AS idem_seq, x.spec AS idem_spec, x.part AS idem_part, x.global AS idem_global FROM read_parquet(%s, filename = true, schema = %s) e JOIN %s_files x ON e.filename = x.path)",
			name, list(paths), m, name)
		var on []string
		for _, id := range eqIDs {
			c := quote(read[id].Name)
			on = append(on, "d."+c+" IS NOT DISTINCT FROM e."+c)
		}
		deleted = append(deleted, "SELECT d.idem_f, d.idem_r FROM idem_d d JOIN idem_files f ON d.idem_f = f.idem_f JOIN "+name+" e ON "+strings.Join(on, " AND ")+
			" WHERE f.seq < e.idem_seq AND (e.idem_global OR (e.idem_spec = f.spec AND e.idem_part = f.part))")
	}
	if len(deleted) == 0 {
		q.WriteString("\nSELECT " + strings.Join(out, ", ") + " FROM idem_d")
		return q.String(), nil
	}
	q.WriteString(",\nidem_deleted AS (" + strings.Join(deleted, "\nUNION ALL\n") + ")\n")
	sel := make([]string, len(out))
	for i, c := range out {
		sel[i] = "d." + c
	}
	q.WriteString("SELECT " + strings.Join(sel, ", ") + " FROM idem_d d ANTI JOIN idem_deleted x ON d.idem_f = x.idem_f AND d.idem_r = x.idem_r")
	return q.String(), nil
}

// fieldMap is read_parquet's schema argument for the fields ids: each
// Parquet column found by its field id, named and typed as the snapshot's
// schema says, NULL in a file written before the field existed.
func fieldMap(fields map[int]*Field, ids []int) (string, error) {
	parts := make([]string, len(ids))
	for i, id := range ids {
		f := fields[id]
		t, err := f.DuckDBType()
		if err != nil {
			return "", err
		}
		parts[i] = fmt.Sprintf("%d: {name: %s, type: %s, default_value: NULL}", id, lit(f.Name), lit(t))
	}
	return "MAP {" + strings.Join(parts, ", ") + "}", nil
}

func list(paths []string) string {
	q := make([]string, len(paths))
	for i, p := range paths {
		q[i] = lit(p)
	}
	return "[" + strings.Join(q, ", ") + "]"
}

func lit(s string) string   { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }
func quote(s string) string { return `"` + strings.ReplaceAll(s, `"`, `""`) + `"` }

// Querier runs a query (a *sql.Tx or *sql.DB on DuckDB).
type Querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// CheckFieldIDs refuses a data or equality delete file whose Parquet
// columns carry no Iceberg field ids (a plain Parquet file added to the
// table, read through the table's name mapping, which idem does not
// apply): read by field id, its every column would read NULL.
func (sc *Scan) CheckFieldIDs(ctx context.Context, q Querier, st Store) error {
	files := append(append([]File(nil), sc.Data...), sc.EqDeletes...)
	if len(files) == 0 {
		return nil
	}
	byPath := map[string]string{}
	paths := make([]string, len(files))
	for i, f := range files {
		p, err := st.Local(ctx, f.Location)
		if err != nil {
			return err
		}
		paths[i], byPath[p] = p, f.Location
	}
	rows, err := q.QueryContext(ctx, "SELECT file_name FROM parquet_schema("+list(paths)+") GROUP BY file_name HAVING count(field_id) = 0 ORDER BY file_name LIMIT 1")
	if err != nil {
		return fmt.Errorf("read the Parquet schemas of iceberg table %s: %w", sc.Metadata.TableUUID, err)
	}
	defer rows.Close()
	for rows.Next() {
		var p string
		if err := rows.Scan(&p); err != nil {
			return err
		}
		loc := byPath[p]
		if loc == "" {
			loc = p
		}
		return fmt.Errorf("iceberg table %s: file %s has no Iceberg field ids (a plain Parquet file added to the table): idem reads columns by field id and does not apply the table's name mapping", sc.Metadata.TableUUID, loc)
	}
	return rows.Err()
}
