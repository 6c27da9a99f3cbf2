package report

import (
	"context"
	"errors"
	"fmt"
	"strings"
)

// Named errors. ExitCode maps them to exit codes in one place.
var (
	// ErrUsage marks bad flags or arguments.
	ErrUsage = errors.New("usage")
	// ErrNoKey marks an apply pipeline or job without key columns: its rows
	// would double on replay.
	ErrNoKey = errors.New("no key columns")
	// ErrRefused marks a run refused by a guard: batch identity, cursor,
	// epoch, stale parent, edited released SQL or a rollback over an
	// erasure. Nothing was committed.
	ErrRefused = errors.New("refused")
	// ErrLocked means another process holds the database file for writing.
	ErrLocked = errors.New("database is held by another writer")
	// ErrCanceled means the run was interrupted and rolled back.
	ErrCanceled = errors.New("canceled, nothing was committed")
	// ErrFatal means DuckDB hit a fatal error and invalidated the open
	// database: this process can no longer use it. What was committed before
	// is safe in the file and its WAL; a new process replays it on open.
	ErrFatal = errors.New("fatal DuckDB error")
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

// Usage returns a *UsageError with the formatted message.
func Usage(format string, args ...any) error {
	return &UsageError{Msg: fmt.Sprintf(format, args...)}
}

// MaxThreads bounds the threads setting: DuckDB starts every thread it is
// given, and 100000 of them took minutes before the first query ran.
const MaxThreads = 1024

// FatalError wraps a DuckDB error that invalidated the database. It wraps
// ErrFatal and the original error.
type FatalError struct{ Err error }

func (e *FatalError) Error() string {
	return fmt.Sprintf("fatal DuckDB error, the database was invalidated and this run committed nothing (%v); "+
		"earlier commits are safe in the database file and its WAL: run the command again, a new process replays them on open", e.Err)
}

func (e *FatalError) Unwrap() []error { return []error{ErrFatal, e.Err} }

// Fatal wraps err in a *FatalError when DuckDB reports that it invalidated
// the database ("FATAL Error", "database has been invalidated").
func Fatal(err error) error {
	var fe *FatalError
	if err == nil || errors.As(err, &fe) {
		return err
	}
	msg := err.Error()
	if strings.Contains(msg, "database has been invalidated") || strings.Contains(msg, "FATAL Error") {
		return &FatalError{Err: err}
	}
	return err
}

// RefusedError is a guard's refusal. It wraps ErrRefused.
type RefusedError struct {
	Guard string // batch, cursor, epoch, parent, released, erasure, wal
	Msg   string
}

func (e *RefusedError) Error() string { return "refused: " + e.Msg }

func (e *RefusedError) Unwrap() error { return ErrRefused }

// Refuse returns the *RefusedError of guard with the formatted message.
func Refuse(guard, format string, args ...any) error {
	return &RefusedError{Guard: guard, Msg: fmt.Sprintf(format, args...)}
}

// LockedError names the database and, where DuckDB reports it, the PID of
// the process that holds it. It wraps ErrLocked.
type LockedError struct {
	Path string
	PID  int
	Err  error
}

func (e *LockedError) Error() string {
	if e.PID > 0 {
		return fmt.Sprintf("database %s is held by another writer (PID %d)", e.Path, e.PID)
	}
	return fmt.Sprintf("database %s is held by another writer", e.Path)
}

func (e *LockedError) Unwrap() []error { return []error{ErrLocked, e.Err} }

// Exit codes of every idem command (docs/cli.md, Exit codes): success, a runtime
// failure with nothing committed, a usage or job-file error, a refusal by a
// guard, and a database held by another writer.
const (
	ExitOK      = 0
	ExitFailure = 1
	ExitUsage   = 2
	ExitRefused = 3
	ExitLocked  = 4
)

// ExitCode maps an error returned by idem's packages to the process exit code.
func ExitCode(err error) int {
	var jfe *JobFileError
	switch {
	case err == nil:
		return ExitOK
	case errors.Is(err, ErrLocked):
		return ExitLocked
	case errors.Is(err, ErrRefused):
		return ExitRefused
	case errors.As(err, &jfe), errors.Is(err, ErrUsage):
		return ExitUsage
	default:
		return ExitFailure
	}
}

// Canceled marks err as ErrCanceled when ctx was canceled (Ctrl-C), so that
// the message says nothing was committed and the exit code is 1. It is only
// for errors returned before COMMIT succeeded.
func Canceled(ctx context.Context, err error) error {
	if err == nil || ctx.Err() == nil || errors.Is(err, ErrCanceled) {
		return err
	}
	return fmt.Errorf("%w: %w", ErrCanceled, err)
}
