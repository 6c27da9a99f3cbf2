package modeltest

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/BurntSushi/toml"

	"github.com/idem-dev/idem/internal/jobfs"
	"github.com/idem-dev/idem/internal/report"
)

// Test is one [[test]] of a test file: a model, the rows of each upstream
// it reads and the rows its result must hold.
type Test struct {
	File  string // the test file, as found
	Line  int    // the line of its [[test]]
	Name  string
	Model string // a job name of the project
	// Given are the upstreams' rows, by upstream job name.
	Given map[string]*Table
	// Expect are the rows the model's result must hold.
	Expect *Table

	pos *positions
	idx int
}

// Table is the rows of one upstream (given) or of the expected result.
type Table struct {
	// Key is where the table is in its test ("given.NAME", "expect").
	Key  string
	Line int
	// Columns are the columns the rows give, in the order they first
	// appear (a CSV's header).
	Columns []string
	Rows    []map[string]cell
	// Types, for given rows, are the types of columns whose type idem
	// cannot know without a database (an upstream that is a model).
	Types map[string]string
	// Compare, for the expected rows, are the columns compared (expect
	// columns); empty: every column of the result.
	Compare []string
	// CSV is set when the rows were given as CSV text.
	CSV bool
}

// test file layout, as decoded.
type fileDoc struct {
	Test []testDoc `toml:"test"`
}

type testDoc struct {
	Name   string              `toml:"name"`
	Model  string              `toml:"model"`
	Given  map[string]tableDoc `toml:"given"`
	Expect *tableDoc           `toml:"expect"`
}

type tableDoc struct {
	Rows    *[]map[string]any `toml:"rows"`
	CSV     *string           `toml:"csv"`
	Types   map[string]string `toml:"types"`
	Columns *[]string         `toml:"columns"`
}

// ReadFile reads and parses the test file at path (see ParseFile). A file
// that is not a regular file, or is larger than jobfs.MaxTOMLBytes, is
// refused without being read whole.
func ReadFile(path string) ([]*Test, error) {
	if st, err := os.Stat(path); err == nil && !st.Mode().IsRegular() {
		return nil, &report.JobFileError{File: path, Msg: "cannot read test file: not a regular file"}
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, &report.JobFileError{File: path, Msg: "cannot read test file: " + unwrapPath(err).Error(), Err: err}
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, jobfs.MaxTOMLBytes+1))
	if err != nil {
		return nil, &report.JobFileError{File: path, Msg: "cannot read test file: " + unwrapPath(err).Error(), Err: err}
	}
	return ParseFile(path, data)
}

func unwrapPath(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// ParseFile parses test file bytes; path names the file in errors. Every
// error is a *report.JobFileError naming the file, the line and the key
// (exit 2): a TOML error, an unknown key, a test without name, model or
// expect, a table with both rows and csv or neither, a value that is no
// scalar, a CSV that does not parse.
func ParseFile(path string, data []byte) ([]*Test, error) {
	if err := jobfs.CheckTOMLBounds(path, data); err != nil {
		var jfe *report.JobFileError
		if errors.As(err, &jfe) {
			jfe.Msg = strings.Replace(jfe.Msg, "a job file or pipeline.toml", "a TOML file", 1)
		}
		return nil, err
	}
	var doc fileDoc
	md, err := toml.Decode(string(data), &doc)
	if err != nil {
		return nil, jobfs.TOMLError(path, data, err)
	}
	if und := md.Undecoded(); len(und) > 0 {
		k := und[0]
		msg := "unknown key: a test file holds [[test]] tables of name, model, [test.given.UPSTREAM] (rows or csv, types) and [test.expect] (rows or csv, columns)"
		return nil, &report.JobFileError{File: path, Line: jobfs.KeyLine(data, k...), Key: k.String(), Msg: msg}
	}
	pos := newPositions(data)
	if len(doc.Test) == 0 {
		return nil, &report.JobFileError{File: path, Msg: "no [[test]]: a test file holds one [[test]] table per test"}
	}
	order := columnOrder(md)
	names := map[string]int{}
	tests := make([]*Test, 0, len(doc.Test))
	for i, d := range doc.Test {
		t := &Test{File: path, Line: pos.testLine(i), Name: d.Name, Model: d.Model, Given: map[string]*Table{}, pos: pos, idx: i}
		if strings.TrimSpace(d.Name) == "" {
			return nil, t.bad("name", "each [[test]] has a name (test %d of the file has none)", i+1)
		}
		if j, ok := names[d.Name]; ok {
			return nil, t.bad("name", "test %q is named twice in the file (tests %d and %d)", d.Name, j+1, i+1)
		}
		names[d.Name] = i
		if strings.TrimSpace(d.Model) == "" {
			return nil, t.bad("model", "test %q names no model: add model = \"JOB\", the name of a model job of the project", d.Name)
		}
		for _, name := range report.SortedKeys(d.Given) {
			tb, err := t.table("given."+name, d.Given[name], order)
			if err != nil {
				return nil, err
			}
			t.Given[name] = tb
		}
		if d.Expect == nil {
			return nil, t.bad("expect", "test %q has no [test.expect]: give the rows the model's result must hold", d.Name)
		}
		if t.Expect, err = t.table("expect", *d.Expect, order); err != nil {
			return nil, err
		}
		tests = append(tests, t)
	}
	return tests, nil
}

// table reads one fixture of test t at key ("given.NAME" or "expect").
func (t *Test) table(key string, d tableDoc, order map[string][]string) (*Table, error) {
	given := key != "expect"
	tb := &Table{Key: key, Line: t.lineOf(key), Types: d.Types}
	switch {
	case d.Rows != nil && d.CSV != nil:
		return nil, t.bad(key, "give rows or csv, not both")
	case d.Rows == nil && d.CSV == nil:
		if given {
			return nil, t.bad(key, "give the upstream's rows: rows = [{ col = value, ... }, ...], or csv = \"\"\"header,...\"\"\" (rows = [] for none)")
		}
		return nil, t.bad(key, "give the rows the result must hold: rows = [{ col = value, ... }, ...], or csv = \"\"\"header,...\"\"\" (rows = [] for none)")
	case given && d.Columns != nil:
		return nil, t.bad(key+".columns", "columns picks the result's columns to compare: it belongs in [test.expect]")
	case !given && d.Types != nil:
		return nil, t.bad(key+".types", "the expected values are cast to the types of the model's result: types belongs to a given upstream whose types idem cannot know")
	}
	for _, c := range report.SortedKeys(d.Types) {
		if err := checkTypeName(d.Types[c]); err != nil {
			return nil, t.bad(key+".types."+c, "%v", err)
		}
	}
	if d.CSV != nil {
		cols, rows, err := parseCSV(*d.CSV)
		if err != nil {
			return nil, t.bad(key+".csv", "%v", err)
		}
		tb.Columns, tb.Rows, tb.CSV = cols, rows, true
	} else {
		seen := map[string]bool{}
		for i, r := range *d.Rows {
			row := map[string]cell{}
			for _, c := range report.SortedKeys(r) {
				if strings.TrimSpace(c) == "" {
					return nil, t.bad(fmt.Sprintf("%s.rows[%d]", key, i+1), "a column name is empty")
				}
				v, err := valueCell(r[c])
				if err != nil {
					return nil, t.bad(fmt.Sprintf("%s.rows[%d]", key, i+1), "column %s: %v", c, err)
				}
				row[c] = v
				seen[c] = true
			}
			tb.Rows = append(tb.Rows, row)
		}
		// In the order the file first gives them (TOML tables have none of
		// their own).
		for _, c := range order[key] {
			if seen[c] {
				tb.Columns = append(tb.Columns, c)
				delete(seen, c)
			}
		}
		tb.Columns = append(tb.Columns, report.SortedKeys(seen)...)
	}
	if d.Columns != nil {
		if len(*d.Columns) == 0 {
			return nil, t.bad(key+".columns", "names no column: list the result's columns to compare, or leave columns out to compare them all")
		}
		for i, c := range *d.Columns {
			if slices.Contains((*d.Columns)[:i], c) {
				return nil, t.bad(key+".columns", "column %s is named twice", c)
			}
		}
		for _, c := range tb.Columns {
			if !slices.Contains(*d.Columns, c) {
				return nil, t.bad(key+".columns", "the expected rows give column %s, which columns does not list: add it, or leave it out of the rows", c)
			}
		}
		tb.Compare = *d.Columns
	}
	return tb, nil
}

// columnOrder is, for each fixture key of a test file ("given.NAME",
// "expect"), its rows' column names in the order they first appear in the
// file.
func columnOrder(md toml.MetaData) map[string][]string {
	out := map[string][]string{}
	for _, k := range md.Keys() {
		var key string
		switch {
		case len(k) == 5 && k[0] == "test" && k[1] == "given" && k[3] == "rows":
			key = "given." + k[2]
		case len(k) == 4 && k[0] == "test" && k[1] == "expect" && k[2] == "rows":
			key = "expect"
		default:
			continue
		}
		if c := k[len(k)-1]; !slices.Contains(out[key], c) {
			out[key] = append(out[key], c)
		}
	}
	return out
}

// bad is the *report.JobFileError of key in test t, at the key's line.
func (t *Test) bad(key, format string, args ...any) error {
	return &report.JobFileError{File: t.File, Line: t.lineOf(key), Key: key, Msg: fmt.Sprintf(format, args...)}
}

// lineOf is the line of key (dotted, inside the test: "given.x.rows")
// in test t's [[test]], or the line of its header when it is not found.
func (t *Test) lineOf(key string) int {
	if t.pos == nil {
		return t.Line
	}
	if i := strings.Index(key, "["); i >= 0 {
		key = key[:i] // rows[2] is on the line of rows
	}
	return t.pos.line(t.idx, strings.Split(key, "."))
}

// positions finds lines in a test file: each [[test]]'s header, and keys
// inside one test.
type positions struct {
	lines  []string
	starts []int // the line (1-based) of each [[test]] header
}

func newPositions(data []byte) *positions {
	p := &positions{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 64<<10), jobfs.MaxTOMLBytes+1)
	for sc.Scan() {
		p.lines = append(p.lines, sc.Text())
		h := strings.TrimSpace(strings.SplitN(sc.Text(), "#", 2)[0])
		if strings.HasPrefix(h, "[[") && strings.Trim(h, " []") == "test" {
			p.starts = append(p.starts, len(p.lines))
		}
	}
	return p
}

// testLine is the line of the i-th [[test]] (from 0); 0 when the tests
// are not written as [[test]] headers.
func (p *positions) testLine(i int) int {
	if i < len(p.starts) {
		return p.starts[i]
	}
	return 0
}

// line is the line of key inside the i-th [[test]].
func (p *positions) line(i int, key []string) int {
	start := p.testLine(i)
	if start == 0 {
		return 0
	}
	end := len(p.lines)
	if i+1 < len(p.starts) {
		end = p.starts[i+1] - 1
	}
	block := strings.Join(p.lines[start-1:end], "\n")
	if l := jobfs.KeyLine([]byte(block), append([]string{"test"}, key...)...); l > 0 {
		return start - 1 + l
	}
	return start
}
