package source

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/idem-dev/idem/internal/catalog"
	"github.com/idem-dev/idem/internal/job"
	"github.com/idem-dev/idem/internal/sqltext"
)

// RewrittenInput is a retained input rewritten without the erased key.
type RewrittenInput struct {
	Old         string `json:"old_sha256"`
	New         string `json:"new_sha256"`
	Bytes       int64  `json:"bytes"`
	RowsRemoved int64  `json:"rows_removed"`
}

// RowFilter picks the rows of a retained input to drop: by key text and
// position in Go (csv, jsonl), by a SQL condition for parquet. A filter
// made by MatchFilter drops by Values instead: every row in which one of
// the listed columns holds one of its values (columns the file lacks are
// skipped; a file with none of them is an error, since nothing in it could
// be told apart).
type RowFilter struct {
	KeyCol, PosCol string
	Drop           func(key string, pos sql.NullInt64) bool
	DropSQL        string
	Values         map[string][]string
	// All drops a row only when every column of Values holds one of its
	// values (a composite key), not any one of them.
	All bool
}

// TupleFilter drops every row in which each column of values holds one of
// that column's values: the rows of one composite key.
func TupleFilter(posCol string, values map[string][]string) RowFilter {
	return RowFilter{PosCol: posCol, Values: values, All: true}
}

// MatchFilter drops every row in which a column of values holds one of
// that column's values; posCol ("" none) is read for the highest position
// dropped.
func MatchFilter(posCol string, values map[string][]string) RowFilter {
	return RowFilter{PosCol: posCol, Values: values}
}

// dropsValue says whether a row whose column text is read by get goes
// under flt.Values.
func (flt RowFilter) dropsValue(get func(col string) (string, bool)) bool {
	if flt.All {
		for col, vals := range flt.Values {
			if v, ok := get(col); !ok || !slices.Contains(vals, v) {
				return false
			}
		}
		return len(flt.Values) > 0
	}
	for col, vals := range flt.Values {
		if v, ok := get(col); ok && slices.Contains(vals, v) {
			return true
		}
	}
	return false
}

// ValuesSQL is a SQL condition true for a row in which a column of values
// that is present holds one of that column's values (compared as text);
// "" when none of the columns is present.
func ValuesSQL(values map[string][]string, present map[string]bool) string {
	var or []string
	for _, col := range slices.Sorted(maps.Keys(values)) {
		if !present[col] || len(values[col]) == 0 {
			continue
		}
		lits := make([]string, len(values[col]))
		for i, v := range values[col] {
			lits[i] = sqltext.SQLString(v)
		}
		or = append(or, "CAST("+sqltext.QuoteIdent(col)+" AS VARCHAR) IN ("+strings.Join(lits, ", ")+")")
	}
	if len(or) == 0 {
		return ""
	}
	return "(" + strings.Join(or, " OR ") + ")"
}

// TupleSQL is a SQL condition true for a row in which every column of
// values holds one of that column's values (compared as text); "" when a
// column is not present.
func TupleSQL(values map[string][]string, present map[string]bool) string {
	var and []string
	for _, col := range slices.Sorted(maps.Keys(values)) {
		if !present[col] || len(values[col]) == 0 {
			return ""
		}
		and = append(and, ValuesSQL(map[string][]string{col: values[col]}, present))
	}
	if len(and) == 0 {
		return ""
	}
	return "(" + strings.Join(and, " AND ") + ")"
}

// matchSQL is the filter's condition over the columns present.
func (flt RowFilter) matchSQL(present map[string]bool) string {
	if flt.All {
		return TupleSQL(flt.Values, present)
	}
	return ValuesSQL(flt.Values, present)
}

// noneOf is the error of a file that holds none of the filter's columns
// (with All, not all of them).
func (flt RowFilter) noneOf() error {
	if flt.All {
		return fmt.Errorf("the key columns %s are not all in the file: the rows to remove cannot be told apart", strings.Join(slices.Sorted(maps.Keys(flt.Values)), ", "))
	}
	return fmt.Errorf("none of the columns %s is in the file: the rows to remove cannot be told apart", strings.Join(slices.Sorted(maps.Keys(flt.Values)), ", "))
}

// KeyFilter drops every row of one key.
func KeyFilter(keyCol, posCol, key string) RowFilter {
	return RowFilter{
		KeyCol: keyCol, PosCol: posCol,
		Drop:    func(k string, _ sql.NullInt64) bool { return k == key },
		DropSQL: "CAST(" + sqltext.QuoteIdent(keyCol) + " AS VARCHAR) = " + sqltext.SQLString(key),
	}
}

// rewriteWithout writes a copy of a retained input without the rows the
// filter drops and stores it under its sha256. It returns nil when the file
// holds no such row, and the highest position of the dropped rows. Kept rows
// keep their bytes (csv, jsonl).
func Rewrite(ctx context.Context, tx *sql.Tx, dbPath string, f catalog.InputRef, format string, flt RowFilter) (*RewrittenInput, sql.NullInt64, error) {
	src := RetainedPath(dbPath, f.SHA256)
	var pos sql.NullInt64
	if _, err := os.Stat(src); err != nil {
		return nil, pos, fmt.Errorf("erase: retained input %s (%s): %w", f.Name, f.SHA256[:12], err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(src), tempPrefix+"erase-*")
	if err != nil {
		return nil, pos, fmt.Errorf("erase: %w", err)
	}
	tmpName := tmp.Name()
	defer os.Remove(tmpName)
	var removed int64
	switch format {
	case job.FormatJSONL:
		removed, pos, err = filterJSONL(src, tmp, flt)
	case job.FormatCSV:
		removed, pos, err = filterCSV(src, tmp, flt)
	case job.FormatParquet:
		tmp.Close()
		removed, pos, err = filterParquet(ctx, tx, src, tmpName, flt)
	default:
		err = fmt.Errorf("unknown input format %q", format)
	}
	if format != job.FormatParquet {
		if cerr := tmp.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		return nil, pos, fmt.Errorf("erase: rewrite retained input %s (%s): %w", f.Name, f.SHA256[:12], err)
	}
	if removed == 0 {
		return nil, pos, nil
	}
	sum, size, err := FileSHA256(tmpName)
	if err != nil {
		return nil, pos, fmt.Errorf("erase: %w", err)
	}
	dst := RetainedPath(dbPath, sum)
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return nil, pos, fmt.Errorf("erase: %w", err)
	}
	if err := syncFile(tmpName); err != nil {
		return nil, pos, fmt.Errorf("erase: %w", err)
	}
	if err := os.Rename(tmpName, dst); err != nil {
		return nil, pos, fmt.Errorf("erase: %w", err)
	}
	return &RewrittenInput{Old: f.SHA256, New: sum, Bytes: size, RowsRemoved: removed}, pos, nil
}

func syncFile(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}

// jsonText is a JSON scalar as DuckDB reads it into VARCHAR: a string's
// text, a number's literal. ok is false for null, a missing field, objects
// and arrays.
func jsonText(raw json.RawMessage) (string, bool) {
	t := bytes.TrimSpace(raw)
	if len(t) == 0 || string(t) == "null" || t[0] == '{' || t[0] == '[' {
		return "", false
	}
	if t[0] == '"' {
		var s string
		if json.Unmarshal(t, &s) != nil {
			return "", false
		}
		return s, true
	}
	return string(t), true
}

func filterJSONL(src string, out io.Writer, flt RowFilter) (int64, sql.NullInt64, error) {
	var pos sql.NullInt64
	in, err := os.Open(src)
	if err != nil {
		return 0, pos, err
	}
	defer in.Close()
	r := bufio.NewReaderSize(in, 1<<20)
	w := bufio.NewWriterSize(out, 1<<20)
	var removed int64
	for {
		line, rerr := r.ReadBytes('\n')
		if len(line) > 0 {
			drop := false
			if t := bytes.TrimSpace(line); len(t) > 0 {
				var obj map[string]json.RawMessage
				if err := json.Unmarshal(t, &obj); err != nil {
					return 0, pos, err
				}
				var p sql.NullInt64
				if text, ok := jsonText(obj[flt.PosCol]); ok && flt.PosCol != "" {
					p = parsePosition(text)
				}
				if flt.Values != nil {
					drop = flt.dropsValue(func(col string) (string, bool) {
						raw, ok := obj[col]
						if !ok {
							return "", false
						}
						return jsonText(raw)
					})
				} else if k, ok := jsonText(obj[flt.KeyCol]); ok {
					drop = flt.Drop(k, p)
				}
				if drop {
					pos = MaxPosition(pos, p)
				}
			}
			if drop {
				removed++
			} else if _, err := w.Write(line); err != nil {
				return 0, pos, err
			}
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			return 0, pos, rerr
		}
	}
	return removed, pos, w.Flush()
}

func filterCSV(src string, out io.Writer, flt RowFilter) (int64, sql.NullInt64, error) {
	var pos sql.NullInt64
	data, err := os.ReadFile(src)
	if err != nil {
		return 0, pos, err
	}
	if len(data) == 0 {
		return 0, pos, nil
	}
	r := csv.NewReader(bytes.NewReader(data))
	r.FieldsPerRecord = -1
	header, err := r.Read()
	if err != nil {
		return 0, pos, err
	}
	keyIdx, posIdx := -1, -1
	valueIdx := map[string]int{}
	for i, h := range header {
		h = strings.TrimSpace(strings.TrimPrefix(h, "\ufeff"))
		if _, ok := flt.Values[h]; ok {
			valueIdx[h] = i
		}
		switch {
		case flt.KeyCol != "" && h == flt.KeyCol:
			keyIdx = i
		case flt.PosCol != "" && h == flt.PosCol:
			posIdx = i
		}
	}
	if flt.Values != nil && (len(valueIdx) == 0 || flt.All && len(valueIdx) < len(flt.Values)) {
		return 0, pos, flt.noneOf()
	}
	if flt.Values == nil && keyIdx < 0 {
		return 0, pos, fmt.Errorf("no column %s in the header", flt.KeyCol)
	}
	start := r.InputOffset()
	w := bufio.NewWriter(out)
	if _, err := w.Write(data[:start]); err != nil {
		return 0, pos, err
	}
	var removed int64
	for {
		rec, err := r.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			return 0, pos, err
		}
		end := r.InputOffset()
		var p sql.NullInt64
		if posIdx >= 0 && posIdx < len(rec) {
			p = parsePosition(rec[posIdx])
		}
		var drop bool
		if flt.Values != nil {
			drop = flt.dropsValue(func(col string) (string, bool) {
				i, ok := valueIdx[col]
				if !ok || i >= len(rec) {
					return "", false
				}
				return rec[i], true
			})
		} else {
			drop = keyIdx < len(rec) && flt.Drop(rec[keyIdx], p)
		}
		if drop {
			removed++
			pos = MaxPosition(pos, p)
		} else if _, err := w.Write(data[start:end]); err != nil {
			return 0, pos, err
		}
		start = end
	}
	if _, err := w.Write(data[start:]); err != nil {
		return 0, pos, err
	}
	return removed, pos, w.Flush()
}

func filterParquet(ctx context.Context, tx *sql.Tx, src, dst string, flt RowFilter) (int64, sql.NullInt64, error) {
	var pos sql.NullInt64
	var removed int64
	read := "read_parquet(" + sqltext.SQLString(src) + ")"
	match := flt.DropSQL
	posSQL := "NULL::BIGINT"
	if flt.PosCol != "" {
		posSQL = PositionSQL("CAST(" + sqltext.QuoteIdent(flt.PosCol) + " AS VARCHAR)")
	}
	if flt.Values != nil {
		present, err := catalog.ColumnSet(ctx, tx, read)
		if err != nil {
			return 0, pos, err
		}
		if match = flt.matchSQL(present); match == "" {
			return 0, pos, flt.noneOf()
		}
		if !present[flt.PosCol] {
			posSQL = "NULL::BIGINT"
		}
	}
	if err := tx.QueryRowContext(ctx, "SELECT count(*), max("+posSQL+") FROM "+read+" WHERE "+match).Scan(&removed, &pos); err != nil {
		return 0, pos, catalog.TrimSQLError(err)
	}
	if removed == 0 {
		return 0, pos, nil
	}
	if _, err := tx.ExecContext(ctx, "COPY (SELECT * FROM "+read+" WHERE NOT coalesce("+match+", false)) TO "+sqltext.SQLString(dst)+" (FORMAT parquet)"); err != nil {
		return 0, pos, catalog.TrimSQLError(err)
	}
	return removed, pos, nil
}

// positionPattern is the one rule by which idem reads a position from text,
// in Go (parsePosition) and in SQL (PositionSQL), as the versioned_changes
// stage step reads source_version: decimal digits with an optional leading
// '+' and surrounding ASCII white space, fitting a BIGINT. 1e18, 7_000,
// "\u00a0 999" and ++888 are not positions (a bare TRY_CAST takes some).
// It is RE2 syntax, read alike by Go's regexp and DuckDB's regexp_full_match.
// A pipeline whose stage rule is stricter (orders: digits only) accepts a
// subset, with the same values.
const (
	positionPattern = `[ \t\n\v\f\r]*\+?[0-9]+[ \t\n\v\f\r]*`
	positionStrip   = `[ \t\n\v\f\r+]`
)

var (
	positionRE      = regexp.MustCompile(`^(?:` + positionPattern + `)$`)
	positionStripRE = regexp.MustCompile(positionStrip)
)

// parsePosition reads a position by positionPattern; not one is NULL.
func parsePosition(text string) sql.NullInt64 {
	if !positionRE.MatchString(text) {
		return sql.NullInt64{}
	}
	n, err := strconv.ParseInt(positionStripRE.ReplaceAllString(text, ""), 10, 64)
	if err != nil {
		return sql.NullInt64{}
	}
	return sql.NullInt64{Int64: n, Valid: true}
}

// PositionSQL is parsePosition as a DuckDB expression over the VARCHAR
// expression text: a BIGINT, or NULL.
func PositionSQL(text string) string {
	return "CASE WHEN regexp_full_match(" + text + ", " + sqltext.SQLString(positionPattern) + ") THEN TRY_CAST(regexp_replace(" +
		text + ", " + sqltext.SQLString(positionStrip) + ", '', 'g') AS BIGINT) END"
}

func MaxPosition(a, b sql.NullInt64) sql.NullInt64 {
	if b.Valid && (!a.Valid || b.Int64 > a.Int64) {
		return b
	}
	return a
}
