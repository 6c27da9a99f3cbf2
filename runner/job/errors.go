package job

import (
	"errors"
	"fmt"
	"strings"
)

// Named errors of job files and pipelines. runner.ExitCode maps them to exit
// codes (runner re-exports them under the same names).
var (
	// ErrUsage marks bad flags or arguments.
	ErrUsage = errors.New("usage")
	// ErrNoKey marks an apply pipeline or job without key columns: its rows
	// would double on replay.
	ErrNoKey = errors.New("no key columns")
)

// JobFileError is a problem in a job file or a pipeline definition: it names
// the file, the line (0 when unknown) and the key.
type JobFileError struct {
	File string
	Line int
	Key  string
	Msg  string
	Err  error
}

func (e *JobFileError) Error() string {
	loc := e.File
	if e.Line > 0 {
		loc = fmt.Sprintf("%s:%d", e.File, e.Line)
	}
	if e.Key != "" {
		return fmt.Sprintf("%s: %s: %s", loc, e.Key, e.Msg)
	}
	return fmt.Sprintf("%s: %s", loc, e.Msg)
}

func (e *JobFileError) Unwrap() error { return e.Err }

// UsageError is a bad flag or argument. It wraps ErrUsage.
type UsageError struct{ Msg string }

func (e *UsageError) Error() string { return e.Msg }

func (e *UsageError) Unwrap() error { return ErrUsage }

func usage(format string, args ...any) error {
	return &UsageError{Msg: fmt.Sprintf(format, args...)}
}

// MaxThreads bounds the threads setting: DuckDB starts every thread it is
// given, and 100000 of them took minutes before the first query ran.
const MaxThreads = 1024

// QuoteIdent quotes a SQL identifier.
func QuoteIdent(s string) string {
	return `"` + strings.ReplaceAll(s, `"`, `""`) + `"`
}

// SQLString quotes a SQL string literal.
func SQLString(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }
