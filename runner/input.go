package runner

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/csv"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/idem-dev/idem/runner/job"
)

// InputFile is one input file: where it was read, its bytes' sha256 and
// size, and where its retained copy lives once the run loads it.
type InputFile struct {
	Path     string `json:"path"`
	SHA256   string `json:"sha256"`
	Size     int64  `json:"bytes"`
	Retained string `json:"-"`
}

// resolveInput expands path (a file or a glob) into its files in name order
// and hashes each one. A missing file, a glob that matches nothing or a
// directory is an error: never an empty batch.
func resolveInput(ctx context.Context, path string, progress job.Progress) ([]InputFile, error) {
	if path == "" {
		return nil, job.Usage("no input: set [input] path in the job file or pass --input")
	}
	var paths []string
	if strings.ContainsAny(path, "*?[") {
		m, err := filepath.Glob(path)
		if err != nil {
			return nil, job.Usage("input pattern %s: %v", path, err)
		}
		if len(m) == 0 {
			return nil, fmt.Errorf("input %s: no file matches: %w", path, os.ErrNotExist)
		}
		paths = m
	} else {
		paths = []string{path}
	}
	files := make([]InputFile, 0, len(paths))
	for _, p := range paths {
		st, err := os.Stat(p)
		if err != nil {
			return nil, fmt.Errorf("input %s: %w", p, err)
		}
		if st.IsDir() {
			return nil, fmt.Errorf("input %s: is a directory, not a file", p)
		}
		if !st.Mode().IsRegular() {
			// A FIFO or a device would be read twice (hashed, then staged)
			// and may never end: refuse it before reading a byte.
			return nil, fmt.Errorf("input %s: not a regular file (%s): idem reads regular files only", p, fileKind(st.Mode()))
		}
		sum, n, err := hashFile(ctx, p, st.Size(), progress)
		if err != nil {
			return nil, err
		}
		files = append(files, InputFile{Path: p, SHA256: sum, Size: n})
	}
	return files, nil
}

// fileKind names a non-regular file's type for messages.
func fileKind(m os.FileMode) string {
	switch {
	case m&os.ModeNamedPipe != 0:
		return "a named pipe"
	case m&os.ModeCharDevice != 0:
		return "a character device"
	case m&os.ModeDevice != 0:
		return "a device"
	case m&os.ModeSocket != 0:
		return "a socket"
	}
	return "mode " + m.Type().String()
}

// hashFile streams an input file through sha256, reporting progress.
func hashFile(ctx context.Context, path string, size int64, progress job.Progress) (string, int64, error) {
	label := "hash " + filepath.Base(path)
	sum, n, err := sumFile(ctx, path, func(done int64) { progress.Count(label, done, size) })
	if err != nil && ctx.Err() == nil {
		return "", 0, fmt.Errorf("input %s: %w", path, err)
	}
	return sum, n, err
}

// sumFile returns a file's sha256 and size, reading it in 1 MiB pieces and
// stopping when ctx is canceled; done (may be nil) gets the bytes read.
func sumFile(ctx context.Context, path string, done func(int64)) (string, int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", 0, err
	}
	defer f.Close()
	h := sha256.New()
	buf := make([]byte, 1<<20)
	var n int64
	for {
		if err := ctx.Err(); err != nil {
			return "", 0, err
		}
		k, err := f.Read(buf)
		if k > 0 {
			h.Write(buf[:k])
			n += int64(k)
			if done != nil {
				done(n)
			}
		}
		if err == io.EOF {
			return hex.EncodeToString(h.Sum(nil)), n, nil
		}
		if err != nil {
			return "", 0, err
		}
	}
}

// inferFormat names the format of the input from the job or the extension.
func inferFormat(declared string, files []InputFile) (string, error) {
	if declared != "" {
		return declared, nil
	}
	ext := strings.ToLower(filepath.Ext(files[0].Path))
	switch ext {
	case ".csv":
		return job.FormatCSV, nil
	case ".jsonl", ".ndjson", ".json":
		return job.FormatJSONL, nil
	case ".parquet":
		return job.FormatParquet, nil
	}
	return "", job.Usage("input %s: cannot infer the format from extension %q: set [input] format to csv, jsonl or parquet", files[0].Path, ext)
}

// storeDir is the folder beside the database that retains committed inputs,
// content-addressed by sha256.
func storeDir(dbPath string) string { return dbPath + ".inputs" }

func retainedPath(dbPath, sum string) string {
	return filepath.Join(storeDir(dbPath), sum[:2], sum)
}

// retain copies each input file into the store (once per content) and
// points Retained at the copy. The copy is synced before the run commits, so
// a committed snapshot's inputs survive a crash. The copy's bytes are checked
// against the digest: a file that changed since it was hashed is an error.
// A copy already in the store is reused only when its bytes still have the
// digest; one that does not (edited, truncated) is replaced by a new copy.
func retain(ctx context.Context, dbPath string, files []InputFile, progress job.Progress) error {
	for i := range files {
		f := &files[i]
		dst := retainedPath(dbPath, f.SHA256)
		if st, err := os.Stat(dst); err == nil && st.Mode().IsRegular() && st.Size() == f.Size {
			sum, _, err := sumFile(ctx, dst, nil)
			if err != nil && ctx.Err() != nil {
				return ctx.Err()
			}
			if err == nil && sum == f.SHA256 {
				f.Retained = dst
				continue
			}
		}
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return fmt.Errorf("retain input %s: %w", f.Path, err)
		}
		if err := copyVerified(ctx, f.Path, dst, f.SHA256, f.Size, progress); err != nil {
			return err
		}
		f.Retained = dst
	}
	return nil
}

func copyVerified(ctx context.Context, src, dst, sum string, size int64, progress job.Progress) error {
	in, err := os.Open(src)
	if err != nil {
		return fmt.Errorf("retain input %s: %w", src, err)
	}
	defer in.Close()
	tmp, err := os.CreateTemp(filepath.Dir(dst), tempPrefix+"retain-*")
	if err != nil {
		return fmt.Errorf("retain input %s: %w", src, err)
	}
	defer os.Remove(tmp.Name())
	h := sha256.New()
	buf := make([]byte, 1<<20)
	var done int64
	for {
		if err := ctx.Err(); err != nil {
			tmp.Close()
			return err
		}
		n, rerr := in.Read(buf)
		if n > 0 {
			h.Write(buf[:n])
			if _, err := tmp.Write(buf[:n]); err != nil {
				tmp.Close()
				return fmt.Errorf("retain input %s: %w", src, err)
			}
			done += int64(n)
			progress.Count("retain "+filepath.Base(src), done, size)
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			tmp.Close()
			return fmt.Errorf("retain input %s: %w", src, rerr)
		}
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("retain input %s: %w", src, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("retain input %s: %w", src, err)
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != sum {
		return fmt.Errorf("input %s changed while the run read it (sha256 %s, then %s)", src, sum[:12], got[:12])
	}
	if err := os.Rename(tmp.Name(), dst); err != nil {
		return fmt.Errorf("retain input %s: %w", src, err)
	}
	return nil
}

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
			return nil, inputReadError(err, files, format)
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
			return nil, inputReadError(err, files, format)
		}
		if err := rows.Err(); err != nil {
			return nil, inputReadError(err, files, format)
		}
		reader = "read_json(getvariable('idem_input'), format = 'newline_delimited', maximum_object_size = " + maxJSONObject + ", columns = {" + strings.Join(cols, ", ") + "})"
	case job.FormatParquet:
		for _, f := range files {
			if f.Size == 0 {
				continue
			}
			rows, err := tx.QueryContext(ctx, "SELECT name FROM parquet_schema(?) WHERE name <> 'schema' AND num_children IS NULL OR num_children = 0", f.Retained)
			if err != nil {
				return nil, inputReadError(err, files, format)
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
		return nil, inputReadError(err, files, format)
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

// maxJSONObject is the largest JSONL line read, in bytes. DuckDB's JSON
// reader allocates twice this per read whatever the file's size, so 256 MB
// failed every JSONL run under memory_limit = 300MB.
const (
	maxJSONObject      = "16777216"
	maxJSONObjectBytes = 16777216
)

var (
	malformedJSON = regexp.MustCompile(`Malformed JSON in file "([^"]*)"`)
	jsonTooLong   = regexp.MustCompile(`\(>(\d+) bytes\)`)
	csvErrorLine  = regexp.MustCompile(`CSV Error on Line: (\d+)`)
	csvErrorFile  = regexp.MustCompile(`(?m)^\s*file = (.*)$`)
)

// inputReadError rewrites a DuckDB reader error so that it names the user's
// file (not its retained copy) and, for malformed JSON, the true line: DuckDB
// 1.5's line numbers in that message are off by one.
func inputReadError(err error, files []InputFile, format string) error {
	msg := err.Error()
	if i := strings.Index(msg, "\n\nLINE "); i >= 0 {
		msg = msg[:i]
	}
	if m := malformedJSON.FindStringSubmatch(msg); m != nil {
		path := originalPath(files, m[1])
		for _, f := range files {
			if f.Retained == m[1] {
				if line, reason := firstBadJSONLine(f.Retained); line > 0 {
					return fmt.Errorf("input %s: line %d: malformed JSON: %s", path, line, reason)
				}
			}
		}
		for _, f := range files {
			msg = strings.ReplaceAll(msg, f.Retained, f.Path)
		}
		return fmt.Errorf("input %s: malformed JSON: %s", path, msg)
	}
	if err := csvReadError(msg, files); err != nil {
		return err
	}
	if strings.Contains(msg, `"maximum_object_size" of`) {
		// DuckDB reads lines up to twice maximum_object_size and names the
		// bound it enforced: "(>33554424 bytes)".
		limit := maxJSONObjectBytes
		if m := jsonTooLong.FindStringSubmatch(msg); m != nil {
			limit, _ = strconv.Atoi(m[1])
		}
		for _, f := range files {
			if line := firstLongLine(f.Retained, limit); line > 0 {
				return fmt.Errorf("input %s: line %d: a JSON object longer than %d bytes, the most idem reads", f.Path, line, limit)
			}
		}
	}
	for _, f := range files {
		msg = strings.ReplaceAll(msg, f.Retained, f.Path)
	}
	if i := strings.Index(msg, "\nPossible fixes:"); i >= 0 {
		msg = msg[:i]
	}
	names := make([]string, len(files))
	for i, f := range files {
		names[i] = f.Path
	}
	return fmt.Errorf("read %s input %s: %s", format, strings.Join(names, ", "), strings.TrimSpace(msg))
}

// csvReadError rewrites DuckDB's "CSV Error on Line: N" as "input FILE:
// line N: reason", without the offending line itself (it can be megabytes
// long), the reader's options or its suggestions. Nil when msg is not one.
func csvReadError(msg string, files []InputFile) error {
	m := csvErrorLine.FindStringSubmatch(msg)
	if m == nil {
		return nil
	}
	path := ""
	if f := csvErrorFile.FindStringSubmatch(msg); f != nil {
		path = originalPath(files, strings.TrimSpace(f[1]))
	} else if len(files) == 1 {
		path = files[0].Path
	}
	// The reason is the last non-blank line between "Original Line:" (whose
	// text may span lines) and the suggestions.
	reason := ""
	lines := strings.Split(msg[strings.Index(msg, m[0])+len(m[0]):], "\n")
	for i, l := range lines {
		l = strings.TrimSpace(l)
		if strings.HasPrefix(l, "Possible") || strings.HasPrefix(l, "file = ") {
			break
		}
		if i == 0 || l == "" || strings.HasPrefix(l, "Original Line:") {
			continue
		}
		reason = l
	}
	if reason == "" {
		reason = "cannot be read as CSV"
	}
	if len(reason) > 300 {
		reason = reason[:300] + "..."
	}
	if path == "" {
		return fmt.Errorf("csv input: line %s: %s", m[1], reason)
	}
	return fmt.Errorf("input %s: line %s: %s", path, m[1], reason)
}

// firstLongLine finds the first line longer than limit bytes, 0 if none.
func firstLongLine(path string, limit int) int {
	f, err := os.Open(path)
	if err != nil {
		return 0
	}
	defer f.Close()
	r := bufio.NewReaderSize(f, 1<<20)
	n, length := 1, 0
	for {
		chunk, err := r.ReadSlice('\n')
		length += len(chunk)
		if len(chunk) > 0 && chunk[len(chunk)-1] == '\n' {
			if length-1 > limit {
				return n
			}
			n, length = n+1, 0
		}
		if err != nil && !errors.Is(err, bufio.ErrBufferFull) {
			if length > limit {
				return n
			}
			return 0
		}
	}
}

// firstBadJSONLine finds the first non-blank line that is not a JSON object
// or not valid UTF-8.
func firstBadJSONLine(path string) (int, string) {
	f, err := os.Open(path)
	if err != nil {
		return 0, ""
	}
	defer f.Close()
	r := bufio.NewReaderSize(f, 1<<20)
	n := 0
	for {
		line, err := r.ReadBytes('\n')
		if len(line) > 0 {
			n++
			t := bytes.TrimSpace(line)
			if len(t) > 0 && !utf8.Valid(t) {
				return n, "invalid UTF-8"
			}
			if len(t) > 0 {
				var obj map[string]json.RawMessage
				if jerr := json.Unmarshal(t, &obj); jerr != nil {
					return n, jerr.Error()
				}
			}
		}
		if err != nil {
			return 0, ""
		}
	}
}

// resolveJobInput resolves the input of a run of j: flag (--input, read
// from the working directory) or else the job's [input] path. A job path
// that matches nothing says so when the old rule would have matched.
func resolveJobInput(ctx context.Context, j *job.Job, flag string, progress job.Progress) ([]InputFile, error) {
	if flag != "" {
		return resolveInput(ctx, flag, progress)
	}
	files, err := resolveInput(ctx, j.Input.Path, progress)
	if err != nil && errors.Is(err, fs.ErrNotExist) {
		if h := j.InputHint(); h != "" {
			return nil, fmt.Errorf("%w%s", err, h)
		}
	}
	return files, err
}

// inputDigest is the input part: the sha256 of the bytes of one file, or of
// the canonical JSON list of the sorted file digests for several.
func inputDigest(files []InputFile) string {
	if len(files) == 1 {
		return files[0].SHA256
	}
	digests := make([]string, len(files))
	for i, f := range files {
		digests[i] = f.SHA256
	}
	sort.Strings(digests)
	sum := sha256.Sum256(job.CanonicalJSON(digests))
	return hex.EncodeToString(sum[:])
}
