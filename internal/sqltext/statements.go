package sqltext

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// CountFunc counts the statements DuckDB's own parser reads in text. An
// error is text DuckDB cannot parse.
type CountFunc func(text string) (int, error)

// SplitError is a text whose statements idem and DuckDB's parser count
// differently: a quote, comment or semicolon idem reads another way than
// DuckDB. Nothing of such a text may run: what idem checked would not be
// what DuckDB executes.
type SplitError struct {
	Idem, DuckDB int  // statements each reads; DuckDB -1 when it read a part as several
	At           int  // offset of the part DuckDB reads as several statements, or -1
	NUL          bool // a NUL byte, or bytes that are not UTF-8
}

func (e *SplitError) Error() string {
	if e.NUL {
		return "the text holds a NUL byte or bytes that are not UTF-8, which DuckDB's parser does not read as written"
	}
	if e.At >= 0 {
		return "DuckDB's parser reads several statements where idem reads one"
	}
	return fmt.Sprintf("DuckDB's parser reads %d statements where idem reads %d", e.DuckDB, e.Idem)
}

// Statements splits text into its statements (MaskSQL, SplitStatements)
// and proves the split with DuckDB's parser: the whole text holds as many
// statements as idem found, and each part alone is one. A part DuckDB
// cannot parse is left to fail when it runs (it runs alone: nothing after
// it in the text runs with it). A text DuckDB cannot parse as a whole is
// proven part by part. Any other disagreement is a *SplitError.
func Statements(text string, count CountFunc) ([]Span, error) {
	if i := unreadable(text); i >= 0 {
		return nil, &SplitError{At: i, NUL: true}
	}
	spans := SplitStatements(MaskSQL(text))
	whole, err := count(text)
	if err == nil && whole != len(spans) {
		return nil, &SplitError{Idem: len(spans), DuckDB: whole, At: -1}
	}
	for _, sp := range spans {
		if n, err := count(text[sp.Start:sp.End]); err == nil && n != 1 {
			return nil, &SplitError{Idem: len(spans), DuckDB: -1, At: sp.Start}
		}
	}
	return spans, nil
}

// One proves that text is one statement to DuckDB's parser before it is
// run (or EXPLAINed, or wrapped in a query): a text DuckDB reads as
// several is refused, since the driver would run all of them. A text
// DuckDB cannot parse is left to fail when it runs.
func One(text string, count CountFunc) error {
	if i := unreadable(text); i >= 0 {
		return &SplitError{At: i, NUL: true}
	}
	n, err := count(text)
	if err != nil || n == 1 {
		return nil
	}
	if strings.TrimSpace(MaskSQL(text)) == "" {
		return nil
	}
	return &SplitError{Idem: 1, DuckDB: n, At: -1}
}

// unreadable is the offset of the first NUL byte of text (DuckDB's parser
// reads a C string: it stops there) or of its first byte that is not
// UTF-8, or -1.
func unreadable(text string) int {
	if i := strings.IndexByte(text, 0); i >= 0 {
		return i
	}
	if utf8.ValidString(text) {
		return -1
	}
	for i, r := range text {
		if r == utf8.RuneError {
			return i
		}
	}
	return 0
}
