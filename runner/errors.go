package runner

import "github.com/idem-dev/idem/internal/job"

// The exit codes of the idem command, which ExitCode maps errors to.
const (
	ExitOK      = job.ExitOK      // success, including skipped and already committed
	ExitFailure = job.ExitFailure // a runtime failure; nothing was committed
	ExitUsage   = job.ExitUsage   // a usage or job-file error
	ExitRefused = job.ExitRefused // refused by a guard
	ExitLocked  = job.ExitLocked  // the database is held by another writer
)

// ExitCode maps an error returned by this package to the exit code the idem
// command gives it.
func ExitCode(err error) int { return job.ExitCode(err) }
