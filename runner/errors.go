package runner

import (
	"errors"
	"fmt"

	"github.com/idem-dev/idem/internal/report"
)

// The exit codes of the idem command, which ExitCode maps errors to.
const (
	ExitOK      = 0 // success, including skipped and already committed
	ExitFailure = 1 // a runtime failure; nothing was committed
	ExitUsage   = 2 // a usage or job-file error
	ExitRefused = 3 // refused by a guard
	ExitLocked  = 4 // the database is held by another writer
)

// Named errors; test for them with errors.Is. Every error this package
// returns is a *JobError or a *PartialError, which wrap them, or, when only
// an AfterCommit hook failed after a commit that stands, an
// *AfterCommitError (exit 0).
var (
	// ErrUsage marks a bad option, an unknown job name or a bad Batch
	// (exit 2). Nothing was opened.
	ErrUsage = report.ErrUsage
	// ErrJobFile marks a job file that cannot be used: unknown key,
	// missing pipeline or version, bad param (exit 2). The message names
	// the file, the line and the key.
	ErrJobFile = errors.New("job file error")
	// ErrRefused marks a run refused by a guard: batch identity, cursor,
	// epoch, stale parent, edited released SQL, an expired snapshot
	// (exit 3). Nothing was committed.
	ErrRefused = report.ErrRefused
	// ErrLocked means another process holds the database for writing
	// (exit 4). Nothing was committed; WithWait waits for it.
	ErrLocked = report.ErrLocked
	// ErrCanceled means ctx ended during a run, which rolled back
	// (exit 1).
	ErrCanceled = report.ErrCanceled
	// ErrNotReproduced means a rerun rebuilt a snapshot whose sha256
	// differs from the one recorded (exit 1); the RerunResult says which.
	ErrNotReproduced = errors.New("snapshot not reproduced")
)

// JobError is the error of one job: its name (empty for an error of no
// single job, such as a cycle of upstreams, or a job file that could not
// be read: its path is in the message) and the exit code the idem command
// gives it. It wraps the cause, so errors.Is finds the named errors.
type JobError struct {
	Job  string
	Code int
	Err  error
}

func (e *JobError) Error() string {
	if e.Job == "" {
		return e.Err.Error()
	}
	return fmt.Sprintf("%s: %v", e.Job, e.Err)
}

// Unwrap returns the cause.
func (e *JobError) Unwrap() error { return e.Err }

// Is reports a job-file error as ErrJobFile.
func (e *JobError) Is(target error) bool {
	var jfe *report.JobFileError
	return target == ErrJobFile && errors.As(e.Err, &jfe)
}

// jobError wraps err (nil stays nil) as the *JobError of job name.
func jobError(name string, err error) error {
	if err == nil {
		return nil
	}
	var je *JobError
	if errors.As(err, &je) {
		return err
	}
	return &JobError{Job: name, Code: report.ExitCode(err), Err: err}
}

// PartialError is returned by Project.Run and Project.Plan when some jobs
// failed or were refused: Failed holds their errors in run order. The
// results returned beside it cover every job, those that committed too;
// jobs downstream of a failure are in them as blocked, not in Failed.
type PartialError struct {
	Failed []*JobError
}

func (e *PartialError) Error() string {
	if len(e.Failed) == 1 {
		return e.Failed[0].Error()
	}
	return fmt.Sprintf("%d jobs failed; first %v", len(e.Failed), e.Failed[0])
}

// Unwrap returns the jobs' errors, so errors.Is(err, ErrRefused) is true
// when any job was refused.
func (e *PartialError) Unwrap() []error {
	errs := make([]error, len(e.Failed))
	for i, f := range e.Failed {
		errs[i] = f
	}
	return errs
}

// ExitCode maps an error returned by this package to the exit code the idem
// command gives it: 0 for nil, the Code of a *JobError, the worst (highest)
// code of a *PartialError's jobs.
func ExitCode(err error) int {
	var pe *PartialError
	var je *JobError
	var ae *AfterCommitError
	switch {
	case errors.As(err, &pe):
		worst := ExitOK
		for _, f := range pe.Failed {
			worst = max(worst, f.Code)
		}
		return worst
	case errors.As(err, &je):
		return je.Code
	case errors.As(err, &ae):
		return ExitOK // the commit stands; the command warns
	}
	return report.ExitCode(err)
}
