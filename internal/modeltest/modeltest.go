package modeltest

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/idem-dev/idem/internal/catalog"
	"github.com/idem-dev/idem/internal/job"
	"github.com/idem-dev/idem/internal/jobkey"
	"github.com/idem-dev/idem/internal/pipeline"
	"github.com/idem-dev/idem/internal/project"
	"github.com/idem-dev/idem/internal/report"
	"github.com/idem-dev/idem/internal/run"
	"github.com/idem-dev/idem/internal/source"
	"github.com/idem-dev/idem/internal/sqltext"
)

// Statuses of a test.
const (
	StatusPass  = "pass"
	StatusFail  = "fail"  // the result differs, or the model failed (exit 1)
	StatusError = "error" // a bad test or a model a run refuses (exit 2)
)

// Result is the outcome of one test, or of a test file that could not be
// read (Name and Model empty).
type Result struct {
	Name     string `json:"name"`
	Model    string `json:"model"`
	File     string `json:"file"`
	Line     int    `json:"line"`
	Status   string `json:"status"`
	ExitCode int    `json:"exit_code"`
	// Error says why a test did not pass when it is not a row diff: the
	// model failed or was refused, the columns differ, the test is bad.
	Error string `json:"error,omitempty"`
	// Columns are the columns compared, in the result's order, key first;
	// Missing the expected rows the result lacks and Unexpected the rows
	// it has beyond them, each as the columns' typed text (null for
	// NULL), ordered by key. A row expected twice and found once is
	// missing once.
	Columns    []string    `json:"columns,omitempty"`
	Missing    [][]*string `json:"missing,omitempty"`
	Unexpected [][]*string `json:"unexpected,omitempty"`
	// Rows is the number of rows of the model's result, Expected the
	// number of expected rows.
	Rows     int64 `json:"rows"`
	Expected int   `json:"expected"`

	lines []diffLine // the diff in its order, missing and unexpected rows together
}

// Report is the outcome of every test found.
type Report struct {
	Tests  []*Result `json:"tests"`
	Passed int       `json:"passed"`
	Failed int       `json:"failed"`
	Errors int       `json:"errors"`
}

// ExitCode is idem test's exit code: 0 when every test passed, 1 when a
// test failed, 2 when a test or test file is bad (the worst met).
func (r *Report) ExitCode() int {
	code := report.ExitOK
	for _, t := range r.Tests {
		code = max(code, t.ExitCode)
	}
	return code
}

// Options are the settings of Run.
type Options struct {
	// Builtins holds the built-in pipelines (idem's sql.FS).
	Builtins fs.FS
	// Each, when set, is called with each test's result as it ends.
	Each func(*Result)
}

// Run finds the tests paths name (Find), loads the job files of each
// suite's project folder and runs every test, each in a scratch database
// of its own that is removed afterwards. A failing or bad test does not
// stop the others. The error is for what stops everything: a path that
// names no tests, a job file that does not load (as idem run would
// report it), or a canceled context.
func Run(ctx context.Context, paths []string, opts Options) (*Report, error) {
	suites, err := Find(paths)
	if err != nil {
		return nil, err
	}
	rep := &Report{Tests: []*Result{}}
	add := func(r *Result) {
		rep.Tests = append(rep.Tests, r)
		switch r.Status {
		case StatusPass:
			rep.Passed++
		case StatusFail:
			rep.Failed++
		default:
			rep.Errors++
		}
		if opts.Each != nil {
			opts.Each(r)
		}
	}
	var sc *scratch
	defer func() {
		if sc != nil {
			sc.close()
		}
	}()
	for _, s := range suites {
		jobs, err := loadJobs(s.Dir, opts.Builtins)
		if err != nil {
			return nil, err
		}
		for _, f := range s.Files {
			tests, err := ReadFile(f)
			if err != nil {
				r := &Result{File: f, Status: StatusError, ExitCode: report.ExitCode(err), Error: err.Error()}
				var jfe *report.JobFileError
				if errors.As(err, &jfe) {
					r.Line = jfe.Line
				}
				add(r)
				continue
			}
			for _, t := range tests {
				if err := ctx.Err(); err != nil {
					return rep, report.Canceled(ctx, err)
				}
				if sc == nil {
					if sc, err = newScratch(ctx); err != nil {
						return rep, err
					}
				}
				add(sc.runTest(ctx, jobs, t))
			}
		}
	}
	return rep, nil
}

// loadJobs loads every job file of the project folder dir.
func loadJobs(dir string, builtins fs.FS) ([]*job.Job, error) {
	files, err := project.Files([]string{dir})
	if err != nil {
		return nil, report.Usage("the tests' project folder %s: %v", dir, err)
	}
	jobs := make([]*job.Job, 0, len(files))
	for _, f := range files {
		j, err := run.LoadJob(f, builtins)
		if err != nil {
			return nil, err
		}
		jobs = append(jobs, j)
	}
	return jobs, nil
}

// failure is a test whose model ran but whose result is not the expected
// one in a way a row diff cannot show (the columns differ).
type failure struct{ msg string }

func (f *failure) Error() string { return f.msg }

// runTest runs test t against the project's jobs: it replays the model's
// steps in a scratch database with the given rows as its upstreams, and
// compares the result with the expected rows.
func (s *scratch) runTest(ctx context.Context, jobs []*job.Job, t *Test) *Result {
	r := &Result{Name: t.Name, Model: t.Model, File: t.File, Line: t.Line}
	err := s.run(ctx, jobs, t, r)
	var f *failure
	switch {
	case err == nil && len(r.Missing)+len(r.Unexpected) == 0:
		r.Status = StatusPass
	case err == nil:
		r.Status, r.ExitCode = StatusFail, report.ExitFailure
	case errors.As(err, &f):
		r.Status, r.ExitCode, r.Error = StatusFail, report.ExitFailure, err.Error()
	default:
		r.ExitCode, r.Error = report.ExitCode(err), err.Error()
		r.Status = StatusFail
		if r.ExitCode != report.ExitFailure {
			r.Status = StatusError
		}
	}
	return r
}

func (s *scratch) run(ctx context.Context, jobs []*job.Job, t *Test, r *Result) error {
	m, err := findModel(jobs, t)
	if err != nil {
		return err
	}
	if err := checkGiven(m, t); err != nil {
		return err
	}
	db, dir, release, err := s.open(ctx, m)
	if err != nil {
		return err
	}
	defer release()

	src, err := given(ctx, db, dir, jobs, m, t)
	if err != nil {
		return err
	}
	mj := *m
	mj.Fencing, mj.Retention = "", job.Retention{}
	src.Job = &mj
	// Audits check a target's rows against what production holds; a test
	// checks the model's rows against what it expects.
	if _, err := db.Run(ctx, &mj, run.RunOptions{SkipAudits: true, Source: src}); err != nil {
		return err
	}
	return compare(ctx, db.SQL(), &mj, t, r)
}

// findModel is the model job test t names.
func findModel(jobs []*job.Job, t *Test) (*job.Job, error) {
	var found []*job.Job
	var names []string
	for _, j := range jobs {
		if j.Name == t.Model {
			found = append(found, j)
		}
		if j.IsModel() {
			names = append(names, j.Name)
		}
	}
	slices.Sort(names)
	switch {
	case len(found) == 0:
		list := strings.Join(names, ", ")
		if list == "" {
			list = "none"
		}
		return nil, t.bad("model", "no job of the project is named %s (its models: %s)", t.Model, list)
	case len(found) > 1:
		files := make([]string, len(found))
		for i, j := range found {
			files[i] = j.File
		}
		return nil, t.bad("model", "%d jobs of the project are named %s, one per database (%s): idem test cannot tell which", len(found), t.Model, strings.Join(files, ", "))
	case !found[0].IsModel():
		return nil, t.bad("model", "job %s runs pipeline %s: idem test runs models (pipeline = \"select\")", t.Model, found[0].Pipeline.Name)
	}
	return found[0], nil
}

// checkGiven checks that the test gives the rows of every upstream the
// model's SQL reads, and none of a job that is not its upstream. An
// upstream the SQL does not read (declared for a sql or relationships
// audit) needs no rows.
func checkGiven(m *job.Job, t *Test) error {
	ups := m.SortedUpstream()
	reads := job.ModelUpstreams(m.ModelSQL)
	for _, u := range ups {
		if _, ok := t.Given[u]; !ok && slices.Contains(reads, u) {
			return t.bad("given", "model %s reads upstream %s ({{upstream:%s}}): give its rows in [test.given.%s]", m.Name, u, u, u)
		}
	}
	for _, g := range report.SortedKeys(t.Given) {
		if !slices.Contains(ups, g) {
			return t.bad("given."+g, "model %s does not read %s: its upstreams are %s ([input] upstream of %s)", m.Name, g, strings.Join(ups, ", "), m.File)
		}
	}
	return nil
}

// given makes the scratch database look like the model's database to its
// SQL: the targets of the jobs beside it (so that reading one that is not
// an upstream is refused as a run refuses it), and each upstream's target
// holding the given rows, exported to the Parquet file {{upstream:NAME}}
// reads, as a rerun reads an upstream's history.
func given(ctx context.Context, db *run.DB, dir string, jobs []*job.Job, m *job.Job, t *Test) (*source.Upstream, error) {
	ups := m.SortedUpstream()
	byName := map[string]*job.Job{}
	for _, j := range jobs {
		if j == m || !sameDatabase(j, m) {
			continue
		}
		if slices.Contains(ups, j.Name) {
			byName[j.Name] = j
			continue
		}
		shell(ctx, db, j)
	}
	// An upstream model that never committed is typed by its SELECT over
	// its own upstreams: those of m's database.
	d := &describer{db: db, m: m, jobs: map[string]*job.Job{}}
	for _, j := range jobs {
		if j != m && sameDatabase(j, m) {
			d.jobs[j.Name] = j
		}
	}
	src := &source.Upstream{Rows: map[string]string{}, Columns: map[string][]catalog.TargetColumn{}}
	for _, u := range ups {
		tb, ok := t.Given[u]
		if !ok {
			continue // not read (checkGiven)
		}
		cols, err := upstreamTable(ctx, db, byName[u], u, t, tb, m, d)
		if err != nil {
			return nil, err
		}
		file := filepath.Join(dir, u+".parquet")
		if err := exportTable(ctx, db, tableOf(byName[u], u), cols, file); err != nil {
			return nil, fmt.Errorf("given %s: %w", u, err)
		}
		src.Rows[u], src.Columns[u] = file, cols
		src.Recorded = append(src.Recorded, jobkey.UpstreamRef{Job: u, Snapshot: 1, JobKey: fixtureDigest(cols, tb)})
	}
	return src, nil
}

func tableOf(j *job.Job, name string) string {
	if j != nil {
		return j.Table
	}
	return name
}

// sameDatabase says whether jobs a and b use one database file.
func sameDatabase(a, b *job.Job) bool {
	x, err1 := filepath.Abs(a.Database)
	y, err2 := filepath.Abs(b.Database)
	if err1 != nil || err2 != nil {
		return a.Database == b.Database
	}
	return x == y
}

// shell creates the target of job j, one the model does not read, in the
// scratch database: by its schema, or as an empty table of its name when
// it has none (a model) or the schema does not run outside a run. A model
// that reads it by name is then refused as a live run refuses it.
func shell(ctx context.Context, db *run.DB, j *job.Job) {
	if strings.TrimSpace(j.DDL) != "" && !j.IsModel() {
		if err := run.ExecStatements(ctx, db.SQL(), j.Expand(j.DDL)); err == nil {
			return
		}
	}
	_, _ = db.SQL().ExecContext(ctx, "CREATE TABLE IF NOT EXISTS main."+sqltext.QuoteIdent(j.Table)+" ("+shellColumn+" BOOLEAN)")
}

// shellColumn is the one column of a shell target.
const shellColumn = "idem_test_shell"

// upstreamTable creates upstream name's target in the scratch database
// and writes the test's rows into it. Its columns and types are those its
// schema gives where the job has one (j not nil, not a model); else they
// are the rows' columns, typed by types or by their values (inferType). A
// given column the schema does not have, a value that does not cast to
// its column's type or rows the schema's constraints refuse make a bad
// test.
//
// Without a schema, a column the rows leave out takes the type of the
// upstream's target as committed in the project's database (m's, read
// only), when it has committed, or else, for a model, the type its SELECT
// gives over its own upstreams' columns (describer): a test gives only the
// columns it is about.
func upstreamTable(ctx context.Context, db *run.DB, j *job.Job, name string, t *Test, tb *Table, m *job.Job, d *describer) ([]catalog.TargetColumn, error) {
	q := db.SQL()
	table := tableOf(j, name)
	var cols []catalog.TargetColumn
	if j != nil && !j.IsModel() && strings.TrimSpace(j.DDL) != "" {
		if err := run.ExecStatements(ctx, q, j.Expand(j.DDL)); err == nil {
			if cols, err = catalog.TargetColumns(ctx, q, table); err != nil {
				return nil, err
			}
		}
	}
	defaults := map[string]string{}
	if len(cols) > 0 {
		if len(tb.Types) > 0 {
			return nil, t.bad(tb.Key+".types", "upstream %s's columns are those of its schema (%s): types is for an upstream whose columns idem cannot know, a model", name, columnList(cols))
		}
		for _, c := range tb.Columns {
			if !slices.ContainsFunc(cols, func(x catalog.TargetColumn) bool { return x.Name == c }) {
				return nil, t.bad(tb.Key, "column %s is not a column of %s's target (%s)", c, name, columnList(cols))
			}
		}
		// A row of a pipeline that keeps conflicts in its target is
		// active unless the test says otherwise.
		if c := j.Pipeline.ConflictColumn; c != "" {
			defaults[c] = "active"
		}
	} else {
		committed := committedColumns(ctx, m.Database, name)
		var described []catalog.TargetColumn
		var why error // why the model's columns could not be described
		if len(committed) == 0 && j != nil && j.IsModel() {
			described, why = d.columns(ctx, name)
		}
		var names []string
		for _, c := range append(slices.Clone(committed), described...) {
			names = append(names, c.Name)
		}
		for _, c := range append(slices.Clone(tb.Columns), report.SortedKeys(tb.Types)...) {
			if !slices.Contains(names, c) {
				names = append(names, c)
			}
		}
		if len(names) == 0 {
			msg := fmt.Sprintf("the rows give no column, and idem cannot know %s's columns without a database (it is a model that has not committed)", name)
			if why != nil {
				msg = fmt.Sprintf("the rows give no column, and %s's columns cannot be described (%v)", name, why)
			}
			return nil, t.bad(tb.Key, "%s: give its columns with types = { col = \"TYPE\", ... }", msg)
		}
		defs := make([]string, len(names))
		for i, c := range names {
			typ, ok := tb.Types[c]
			if k := slices.IndexFunc(committed, func(x catalog.TargetColumn) bool { return x.Name == c }); !ok && k >= 0 {
				typ, ok = committed[k].Type, true
			}
			// A described type is the SELECT's, over the types of the
			// upstream's own upstreams: it fills the columns the rows
			// leave out, and a given column keeps the type its values
			// (or types) say, as a test that gives it means.
			if k := slices.IndexFunc(described, func(x catalog.TargetColumn) bool { return x.Name == c }); !ok && k >= 0 && !slices.Contains(tb.Columns, c) {
				typ, ok = described[k].Type, true
			}
			if !ok {
				cells := make([]cell, len(tb.Rows))
				for k, row := range tb.Rows {
					cells[k] = row[c]
				}
				var err error
				if typ, err = inferType(cells); err != nil {
					return nil, t.bad(tb.Key, "column %s: %v", c, err)
				}
			}
			cols = append(cols, catalog.TargetColumn{Name: c, Type: typ})
			defs[i] = sqltext.QuoteIdent(c) + " " + typ
		}
		if _, err := q.ExecContext(ctx, "CREATE OR REPLACE TABLE main."+sqltext.QuoteIdent(table)+" ("+strings.Join(defs, ", ")+")"); err != nil {
			return nil, t.bad(tb.Key+".types", "%v", catalog.TrimSQLError(err))
		}
		// The types DuckDB gives them, spelled its way (INT becomes INTEGER).
		var err error
		if cols, err = catalog.TargetColumns(ctx, q, table); err != nil {
			return nil, err
		}
	}
	return cols, insertRows(ctx, db, table, cols, t, tb, defaults)
}

func columnList(cols []catalog.TargetColumn) string {
	names := make([]string, len(cols))
	for i, c := range cols {
		names[i] = c.Name
	}
	return strings.Join(names, ", ")
}

// insertRows writes tb's rows into table, each value cast from its text to
// its column's type; a column a row leaves out is NULL, or its default.
func insertRows(ctx context.Context, db *run.DB, table string, cols []catalog.TargetColumn, t *Test, tb *Table, defaults map[string]string) error {
	if len(tb.Rows) == 0 {
		return nil
	}
	names := make([]string, len(cols))
	casts := make([]string, len(cols))
	for i, c := range cols {
		names[i] = sqltext.QuoteIdent(c.Name)
		casts[i] = "CAST(?::VARCHAR AS " + c.Type + ")"
	}
	values := "(" + strings.Join(casts, ", ") + ")"
	const batch = 200
	for from := 0; from < len(tb.Rows); from += batch {
		rows := tb.Rows[from:min(from+batch, len(tb.Rows))]
		list := make([]string, len(rows))
		var args []any
		for i, row := range rows {
			list[i] = values
			for _, c := range cols {
				v, ok := row[c.Name]
				if d, has := defaults[c.Name]; !ok && has {
					v = cell{d, kindString}
				}
				args = append(args, v.arg())
			}
		}
		q := "INSERT INTO main." + sqltext.QuoteIdent(table) + " (" + strings.Join(names, ", ") + ") VALUES " + strings.Join(list, ", ")
		if _, err := db.SQL().ExecContext(ctx, q, args...); err != nil {
			if bad := castError(ctx, db, cols, t, tb, from, rows); bad != nil {
				return bad
			}
			return t.bad(tb.Key, "the rows do not fit %s's target: %v", table, catalog.TrimSQLError(err))
		}
	}
	return nil
}

// castError names the first value of rows (the rows of tb from index
// from) that does not cast to its column's type, or is nil.
func castError(ctx context.Context, db *run.DB, cols []catalog.TargetColumn, t *Test, tb *Table, from int, rows []map[string]cell) error {
	for i, row := range rows {
		for _, c := range cols {
			v, ok := row[c.Name]
			if !ok || v.null() {
				continue
			}
			var failed bool
			if err := db.SQL().QueryRowContext(ctx, "SELECT TRY_CAST(?::VARCHAR AS "+c.Type+") IS NULL", v.text).Scan(&failed); err != nil || !failed {
				continue
			}
			return t.bad(rowKey(tb, from+i), "%scolumn %s: %q is not a %s (its type in the upstream's target)", rowWord(tb, from+i), c.Name, v.text, c.Type)
		}
	}
	return nil
}

// rowKey is the key that names row i (from 0) of tb in messages:
// given.x.rows[3], or given.x.csv for a CSV, whose row rowWord names.
func rowKey(tb *Table, i int) string {
	if tb.CSV {
		return tb.Key + ".csv"
	}
	return fmt.Sprintf("%s.rows[%d]", tb.Key, i+1)
}

func rowWord(tb *Table, i int) string {
	if tb.CSV {
		return fmt.Sprintf("row %d: ", i+1)
	}
	return ""
}

// exportTable writes table's rows to a Parquet file for {{upstream:NAME}}
// to read, as a rerun writes an upstream's history: a type Parquet cannot
// hold exactly (HUGEINT, UHUGEINT) goes as its text, cast back on read.
func exportTable(ctx context.Context, db *run.DB, table string, cols []catalog.TargetColumn, file string) error {
	q := "COPY (SELECT " + strings.Join(source.RowsFileColumns(cols), ", ") + " FROM main." + sqltext.QuoteIdent(table) + ") TO " + sqltext.SQLString(file) + " (FORMAT parquet)"
	if _, err := db.SQL().ExecContext(ctx, q); err != nil {
		return catalog.TrimSQLError(err)
	}
	return nil
}

// fixtureDigest stands for the job key of an upstream snapshot holding
// the given rows.
func fixtureDigest(cols []catalog.TargetColumn, tb *Table) string {
	rows := make([]any, len(tb.Rows))
	for i, r := range tb.Rows {
		m := map[string]any{}
		for c, v := range r {
			m[c] = v.arg()
		}
		rows[i] = m
	}
	return pipeline.DigestString(string(jobkey.CanonicalJSON(map[string]any{"columns": cols, "rows": rows})))
}

// committedColumns are the columns of upstream name's target as committed
// in the database at path, opened read-only, or none: no such database,
// no committed snapshot, or a database another process holds.
func committedColumns(ctx context.Context, path, name string) []catalog.TargetColumn {
	if path == "" {
		return nil
	}
	if _, err := os.Stat(path); err != nil {
		return nil
	}
	db, err := run.OpenReader(ctx, path, run.OpenOptions{}, nil)
	if err != nil {
		return nil
	}
	defer db.Close()
	st, err := catalog.ReadState(ctx, db.SQL(), name)
	if err != nil || !st.Exists || st.Snapshot == 0 || st.Target == "" {
		return nil
	}
	cols, err := catalog.TargetColumns(ctx, db.SQL(), st.Target)
	if err != nil {
		return nil
	}
	return cols
}
