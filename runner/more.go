package runner

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"path/filepath"

	"github.com/idem-dev/idem/internal/docs"
	"github.com/idem-dev/idem/internal/inspect"
	"github.com/idem-dev/idem/internal/lint"
	"github.com/idem-dev/idem/internal/modeltest"
	"github.com/idem-dev/idem/internal/pipeline"
	"github.com/idem-dev/idem/internal/scaffold"
	"github.com/idem-dev/idem/pipelines"
)

// DuckDBVersion is the version of the DuckDB library idem is built with,
// as DuckDB reports it (v2.0.0).
func DuckDBVersion(ctx context.Context) (string, error) {
	v, err := inspect.DuckDBVersion(ctx)
	return v, jobError("", err)
}

// DocsResult reports the site Project.Docs wrote. The JSON keys are those
// of idem docs --json.
type DocsResult struct {
	// Bytes and SHA256 are index.html's; the same project and databases
	// give the same bytes.
	Bytes int `json:"bytes"`
	// Index is the page written, Out the folder.
	Index string `json:"index"`
	// Jobs names every job of the site; NotRun those that never
	// committed.
	Jobs   []string `json:"jobs"`
	NotRun []string `json:"not_run"`
	Out    string   `json:"out"`
	SHA256 string   `json:"sha256"`
}

// Docs writes the project's documentation site, one self-contained
// out/index.html, as idem docs does: every job, its lineage, runs,
// snapshots and tests, read from its job files (paths relative to dir,
// the project folder) and its databases, opened read-only. It writes
// nothing else and refuses (ErrUsage) an out that holds other files or an
// index.html it did not write.
func (p *Project) Docs(ctx context.Context, dir, out string) (*DocsResult, error) {
	site, err := docs.Gather(ctx, p.p, dir, docs.Options{Wait: p.s.wait})
	if err != nil {
		return nil, jobError("", err)
	}
	page, err := docs.Render(site)
	if err != nil {
		return nil, jobError("", err)
	}
	if err := docs.Write(out, page); err != nil {
		return nil, jobError("", err)
	}
	sum := sha256.Sum256(page)
	res := &DocsResult{Out: out, Index: filepath.Join(out, docs.IndexFile), Bytes: len(page), SHA256: hex.EncodeToString(sum[:]),
		Jobs: []string{}, NotRun: []string{}}
	for _, j := range site.Jobs {
		res.Jobs = append(res.Jobs, j.Name)
		if j.NotRun != "" {
			res.NotRun = append(res.NotRun, j.Name)
		}
	}
	return res, nil
}

// The statuses of a TestResult.
const (
	TestPass  = modeltest.StatusPass
	TestFail  = modeltest.StatusFail  // the result differs, or the model failed (exit 1)
	TestError = modeltest.StatusError // a bad test, or a model a run refuses (exit 2)
)

// TestResult is the outcome of one unit test of a model ([[test]]), or of
// a test file that could not be read (Name and Model empty). The JSON keys
// are those of idem test --json.
type TestResult struct {
	Name     string `json:"name"`
	Model    string `json:"model"`
	File     string `json:"file"`
	Line     int    `json:"line"`
	Status   string `json:"status"`
	ExitCode int    `json:"exit_code"`
	// Error says why a test did not pass when it is not a row diff.
	Error string `json:"error,omitempty"`
	// Columns are the columns compared, key first; Missing the expected
	// rows the result lacks and Unexpected the rows it has beyond them,
	// as the columns' typed text (nil for NULL), by key.
	Columns    []string    `json:"columns,omitempty"`
	Missing    [][]*string `json:"missing,omitempty"`
	Unexpected [][]*string `json:"unexpected,omitempty"`
	// Rows is the number of rows of the model's result, Expected the
	// number of expected rows.
	Rows     int64 `json:"rows"`
	Expected int   `json:"expected"`

	explain string
}

// Explain says why the test did not pass, in lines: the error, or the row
// diff, missing rows (-) and unexpected ones (+) in key order.
func (r *TestResult) Explain() string { return r.explain }

// TestReport is the outcome of every test found. The JSON keys are those
// of idem test --json.
type TestReport struct {
	Tests  []*TestResult `json:"tests"`
	Passed int           `json:"passed"`
	Failed int           `json:"failed"`
	Errors int           `json:"errors"`
}

// ExitCode is the idem test command's exit code for the report: the worst
// of its tests'.
func (r *TestReport) ExitCode() int {
	code := ExitOK
	for _, t := range r.Tests {
		code = max(code, t.ExitCode)
	}
	return code
}

// Test runs the unit tests of models that paths name, as idem test does:
// a project folder (its tests/*.toml against its job files), a folder of
// test files or a test file; none, the working directory. Each test
// replays its model in a scratch database of its own; the project's
// database is only opened read-only, for the committed types of columns
// the given rows leave out. each, when not nil, is called with each result as
// it comes. The error is for tests that could not be found; a test that
// fails is in the report.
func Test(ctx context.Context, paths []string, each func(*TestResult)) (*TestReport, error) {
	opts := modeltest.Options{Builtins: pipelines.FS}
	results := map[*modeltest.Result]*TestResult{}
	opts.Each = func(r *modeltest.Result) {
		results[r] = testResultOf(r)
		if each != nil {
			each(results[r])
		}
	}
	rep, err := modeltest.Run(ctx, paths, opts)
	if err != nil {
		return nil, jobError("", err)
	}
	out := &TestReport{Tests: make([]*TestResult, len(rep.Tests)), Passed: rep.Passed, Failed: rep.Failed, Errors: rep.Errors}
	for i, r := range rep.Tests {
		if out.Tests[i] = results[r]; out.Tests[i] == nil {
			out.Tests[i] = testResultOf(r)
		}
	}
	return out, nil
}

func testResultOf(r *modeltest.Result) *TestResult {
	return &TestResult{Name: r.Name, Model: r.Model, File: r.File, Line: r.Line, Status: r.Status, ExitCode: r.ExitCode,
		Error: r.Error, Columns: r.Columns, Missing: r.Missing, Unexpected: r.Unexpected, Rows: r.Rows, Expected: r.Expected,
		explain: r.Explain()}
}

// The modes of Init: a job that applies change batches from a landing
// folder, one whose whole input replaces its target, or a model (one
// SELECT over a source job, written beside it).
const (
	ModeApply   = pipeline.ModeApply
	ModeRefresh = pipeline.ModeRefresh
	ModeSelect  = scaffold.ScaffoldSelect
)

// Init writes a starting project into dir, as idem init does: a pipeline
// called name (also the job's and its table's) of mode, its job file and a
// small input, or with ModeSelect a model and the source job it reads. It
// returns the files written and overwrites none: a file already there is
// an error (ErrUsage), and so is an unknown mode.
func Init(dir, name, mode string) ([]string, error) {
	written, err := scaffold.Scaffold(dir, name, mode)
	return written, jobError("", err)
}

// Finding is one finding of Lint.
type Finding struct {
	// ID is the check (L001 ...), Severity error or warning.
	ID       string `json:"id"`
	Severity string `json:"severity"`
	// File and Line say where (Line 0: the whole file).
	File    string `json:"file"`
	Line    int    `json:"line,omitempty"`
	Message string `json:"message"`
	Fix     string `json:"fix"`
}

// LintReport is what Lint found. The JSON keys are those of idem lint
// --json.
type LintReport struct {
	Job      string    `json:"job"`
	Pipeline string    `json:"pipeline"`
	Findings []Finding `json:"findings"`
	Errors   int       `json:"errors"`
	Warnings int       `json:"warnings"`
}

// Lint checks the job file at path and its pipeline's SQL without running
// anything, as idem lint does: a job file that cannot be used is finding
// L001; the SQL is read with DuckDB's own parser. The error is for a
// report that could not be made.
func Lint(ctx context.Context, path string) (*LintReport, error) {
	rep, err := lint.Check(ctx, path, pipelines.FS)
	if err != nil {
		return nil, jobError("", err)
	}
	out := &LintReport{Job: rep.Job, Pipeline: rep.Pipeline, Errors: rep.Errors, Warnings: rep.Warnings}
	if rep.Findings != nil {
		out.Findings = make([]Finding, len(rep.Findings))
		for i, f := range rep.Findings {
			out.Findings[i] = Finding(f)
		}
	}
	return out, nil
}
