package runner

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"sort"
	"time"

	"github.com/idem-dev/idem/runner/job"
)

// The job file, pipeline, template and key types live in package job; these
// aliases keep runner's API and callers unchanged.
type (
	Job            = job.Job
	InputSpec      = job.InputSpec
	DuckDBSettings = job.DuckDBSettings
	Pipeline       = job.Pipeline
	Step           = job.Step
	Param          = job.Param
	Column         = job.Column
	Rule           = job.Rule
	Parts          = job.Parts
	TransformPart  = job.TransformPart
	SchemaPart     = job.SchemaPart
)

// Constants of package job, under their runner names.
const (
	FormatCSV       = job.FormatCSV
	FormatJSONL     = job.FormatJSONL
	FormatParquet   = job.FormatParquet
	ExtraError      = job.ExtraError
	ExtraIgnore     = job.ExtraIgnore
	FencingOptional = job.FencingOptional
	FencingRequired = job.FencingRequired
	InputModeFiles  = job.InputModeFiles
	BatchPerFile    = job.BatchPerFile
	BatchAll        = job.BatchAll
	PartInput       = job.PartInput
	PartTransform   = job.PartTransform
	PartConfig      = job.PartConfig
	PartSchema      = job.PartSchema
	ModeRefresh     = job.ModeRefresh
	ModeApply       = job.ModeApply
)

// BuiltinNames lists the built-in pipelines.
func BuiltinNames(builtins fs.FS) []string { return job.BuiltinNames(builtins) }

// StepsDigest is job.StepsDigest.
func StepsDigest(steps []Step) string { return job.StepsDigest(steps) }

// LoadPipeline is job.LoadPipeline.
func LoadPipeline(fsys fs.FS, origin string) (*Pipeline, error) {
	return job.LoadPipeline(fsys, origin)
}

// LoadJob reads and validates the job file at path (see job.LoadJob), and
// proves its quality rules on a scratch DuckDB. Every error is a
// *JobFileError naming the file, the line and the key.
func LoadJob(path string, builtins fs.FS) (*Job, error) {
	data, err := job.ReadJobFile(path)
	if err != nil {
		return nil, err
	}
	return ParseJob(path, data, builtins)
}

// ParseJob validates job file bytes; path names the file in errors.
func ParseJob(path string, data []byte, builtins fs.FS) (*Job, error) {
	return parseJob(path, data, builtins, false)
}

// parseJob is ParseJob; lenient accepts an apply pipeline without key
// columns, for idem lint to report.
func parseJob(path string, data []byte, builtins fs.FS, lenient bool) (*Job, error) {
	parse := job.ParseJob
	if lenient {
		parse = job.ParseJobLenient
	}
	j, err := parse(path, data, builtins)
	if err != nil {
		return nil, err
	}
	if len(j.Rules) > 0 {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if i, err := validateRules(ctx, j); err != nil {
			return nil, &JobFileError{File: j.File, Line: job.RuleLine(data, i), Key: fmt.Sprintf("quality.rules[%d]", i+1), Msg: err.Error()}
		}
	}
	return j, nil
}

// resolveJobInput resolves the input of a run of j: flag (--input, read
// from the working directory) or else the job's [input] path. A job path
// that matches nothing says so when the old rule would have matched.
func resolveJobInput(ctx context.Context, j *Job, flag string, progress Progress) ([]InputFile, error) {
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
	sum := sha256.Sum256(canonicalJSON(digests))
	return hex.EncodeToString(sum[:])
}

// MaxThreads bounds the threads setting (job.MaxThreads).
const MaxThreads = job.MaxThreads

// identifier is what idem accepts as a job, table or column name.
var identifier = job.Identifier

// Helpers of package job that runner uses under their old names.
func quoteIdent(s string) string                  { return job.QuoteIdent(s) }
func sqlString(s string) string                   { return job.SQLString(s) }
func canonicalJSON(v any) []byte                  { return job.CanonicalJSON(v) }
func digestString(s string) string                { return job.DigestString(s) }
func sortedKeys[V any](m map[string]V) []string   { return job.SortedKeys(m) }
func convertParam(typ string, v any) (any, error) { return job.ConvertParam(typ, v) }
func equalKeys(a, b []string) bool                { return job.EqualKeys(a, b) }
func parseParts(s string) (Parts, error)          { return job.ParseParts(s) }
func readJobFile(path string) ([]byte, error)     { return job.ReadJobFile(path) }
