package run

import (
	"context"
	"fmt"
	"io/fs"
	"time"

	"github.com/idem-dev/idem/internal/job"
	"github.com/idem-dev/idem/internal/jobfs"
	"github.com/idem-dev/idem/internal/report"
)

// LoadJob reads and validates the job file at path (see job.LoadJob), and
// proves its quality rules on a scratch DuckDB. Every error is a
// *JobFileError naming the file, the line and the key.
func LoadJob(path string, builtins fs.FS) (*job.Job, error) {
	data, err := jobfs.ReadJobFile(path)
	if err != nil {
		return nil, err
	}
	return ParseJob(path, data, builtins)
}

// ParseJob validates job file bytes; path names the file in errors.
func ParseJob(path string, data []byte, builtins fs.FS) (*job.Job, error) {
	return parseJob(path, data, builtins, false)
}

// ParseJobLenient is ParseJob that accepts an apply pipeline without key
// columns, for idem lint to report.
func ParseJobLenient(path string, data []byte, builtins fs.FS) (*job.Job, error) {
	return parseJob(path, data, builtins, true)
}

// parseJob is ParseJob; lenient accepts an apply pipeline without key
// columns, for idem lint to report.
func parseJob(path string, data []byte, builtins fs.FS, lenient bool) (*job.Job, error) {
	parse := job.ParseJob
	if lenient {
		parse = job.ParseJobLenient
	}
	j, err := parse(path, data, builtins)
	if err != nil {
		return nil, err
	}
	if j.Incremental != "" {
		if err := checkIncremental(j); err != nil { // incremental.go
			return nil, err
		}
	}
	if len(j.Rules) > 0 {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if i, err := validateRules(ctx, j); err != nil {
			return nil, &report.JobFileError{File: j.File, Line: jobfs.RuleLine(data, i), Key: fmt.Sprintf("quality.rules[%d]", i+1), Msg: err.Error()}
		}
	}
	return j, nil
}
