package runner

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// TestLayering: a lower layer never imports a higher one. Each package
// listed here may depend only on the idem packages it names; database/sql
// and DuckDB are forbidden to the pure ones. It reads go list's view of the
// build, so an import added anywhere in the package (tests aside) fails it.
func TestLayering(t *testing.T) {
	t.Parallel()
	const module = "github.com/idem-dev/idem"
	const (
		report  = module + "/internal/report"
		sqltext = module + "/internal/sqltext"
		seal    = module + "/internal/seal"
		jobkey  = module + "/internal/jobkey"
		jobfs   = module + "/internal/jobfs"
		pipe    = module + "/internal/pipeline"
		job     = module + "/internal/job"
		project = module + "/internal/project"
		catalog = module + "/internal/catalog"
		source  = module + "/internal/source"
		run     = module + "/internal/run"
		export  = module + "/internal/export"
		lint    = module + "/internal/lint"
		scaf    = module + "/internal/scaffold"
		diff    = module + "/internal/diff"
		dbfile  = module + "/internal/dbfile"
		inspect = module + "/internal/inspect"
		history = module + "/internal/history"
		planner = module + "/internal/planner"
		env     = module + "/internal/env"
		storage = module + "/internal/storage"
		prun    = module + "/internal/projectrun"
		mtest   = module + "/internal/modeltest"
		docs    = module + "/internal/docs"
		lake    = module + "/internal/lake"
		runner  = module + "/runner"
		sqlfs   = module + "/pipelines"
	)
	pure := []string{"database/sql", "github.com/duckdb/"}
	// jobLayer is internal/job and the pure packages below it, which
	// every package above may reach.
	jobLayer := []string{report, sqltext, seal, jobkey, jobfs, pipe, job}
	with := func(base []string, more ...string) []string { return append(slices.Clip(base), more...) }
	layers := []struct {
		pkg       string
		idem      []string // idem packages it may depend on
		forbidden []string // import path prefixes it must not depend on
		direct    bool     // check its own imports only (they bring the layers below)
	}{
		// What every layer shares: error kinds and exit codes, decisions,
		// progress, the CLI's printing helpers. The floor: no idem package.
		{pkg: report, forbidden: pure},
		// SQL text as idem reads it (masking, statements, DuckDB's parse
		// tree), and the seal over it: which SQL a step may run.
		{pkg: sqltext, idem: []string{report}, forbidden: pure},
		{pkg: seal, idem: []string{report, sqltext}, forbidden: pure},
		// The job key: its parts, their canonical JSON, the sha256.
		{pkg: jobkey, forbidden: pure},
		// A job's files read within bounds, inside their folder, with
		// errors at a TOML key's line; and a pipeline's folder and the
		// template language of its steps.
		{pkg: jobfs, idem: []string{report}, forbidden: pure},
		{pkg: pipe, idem: []string{report, sqltext, seal, jobfs}, forbidden: pure},
		// The job file, and everything a job is before a database sees it.
		{pkg: job, idem: []string{report, sqltext, seal, jobkey, jobfs, pipe}, forbidden: pure},
		{pkg: project, idem: jobLayer, forbidden: pure},
		{pkg: catalog, idem: jobLayer},
		// Iceberg tables read natively (metadata, manifests, files): no idem
		// package; source reads a table through it.
		{pkg: lake},
		{pkg: lake + "/laketest", idem: []string{lake}},
		{pkg: source, idem: with(jobLayer, catalog, lake)},
		{pkg: run, idem: with(jobLayer, catalog, source, lake)},
		// Pinned reads of a job's tables and the export: the lowest of the
		// command packages, under every other.
		{pkg: export, idem: with(jobLayer, catalog, source, run, lake)},
		// idem lint: a job's SQL through DuckDB's parser, on a scratch
		// database (run opens it); no job's database, no other command.
		{pkg: lint, idem: with(jobLayer, catalog, source, run, lake)},
		// idem init: the files it writes, from templates; job alone.
		{pkg: scaf, idem: jobLayer, forbidden: pure},
		// idem diff: two reads of a table compared by key, through
		// export's pinned reads.
		{pkg: diff, idem: with(jobLayer, catalog, source, run, lake, export)},
		// compact and backup: the database file as a whole.
		{pkg: dbfile, idem: with(jobLayer, catalog, source, run, lake, export)},
		// The read-only looks into a job's database: query, show (release
		// packets), what an extension reads.
		{pkg: inspect, idem: with(jobLayer, catalog, source, run, lake, export)},
		// What rewrites or replays a job's history of snapshots: rerun,
		// erase (and its chain and journal), rollback, expire and
		// checkpoints, log and fence. Rerun replays erasures and an
		// erasure recomputes models as they ran: one package.
		{pkg: history, idem: with(jobLayer, catalog, source, run, lake, export, diff, dbfile)},
		// idem plan: a run's decision through its own guards, rolled back;
		// a model's column changes.
		{pkg: planner, idem: with(jobLayer, catalog, source, run, lake, export, diff, dbfile, history)},
		// Environments: a change built beside production, diffed against
		// it and promoted; it plans each job to know which to build.
		{pkg: env, idem: with(jobLayer, catalog, source, run, lake, export, diff, dbfile, history, planner)},
		// idem du: the database, its environments, tables and retained
		// inputs, and what expire would free.
		{pkg: storage, idem: with(jobLayer, catalog, source, run, lake, export, diff, dbfile, history, planner, env)},
		// Unit tests of models (idem test): a replay in a scratch
		// database, beside history, with the project's job files.
		{pkg: mtest, idem: with(jobLayer, project, catalog, source, run, lake)},
		// Running a project: order, blocking, concurrent groups, shared
		// handles; what a job's run is stays its caller's.
		{pkg: prun, idem: []string{job, project, run}, direct: true},
		// idem docs: a project's site, read-only through catalog, inspect
		// and history's log (run opens the databases); no source, no
		// projectrun.
		{pkg: docs, idem: []string{report, sqltext, jobfs, job, project, catalog, run, inspect, history}, direct: true},
		// The public API is a thin layer over run, the command packages
		// and projectrun, with the built-in pipelines; it never reaches
		// source or catalog itself.
		{pkg: runner, idem: []string{report, sqltext, jobkey, pipe, job, project, run, export, lint, scaf, diff, dbfile, inspect, history, planner, env, storage, prun, mtest, docs, sqlfs}, direct: true},
		// The CLI is a client of the public API: runner, and report, its
		// printing helper (TestCLIImports holds each of its files to them).
		{pkg: module + "/cmd/idem/cli", idem: []string{runner, report}, direct: true},
		// The defaults the test packages share: no idem package.
		{pkg: module + "/internal/testflags", idem: nil, direct: true},
		// The kit of the CLI's test packages reads databases and job files
		// through the library; it never imports the CLI, whose own tests
		// use it (each test package hands it the CLI from its TestMain).
		{pkg: module + "/cmd/idem/cli/internal/clitest", idem: []string{report, sqltext, job, catalog, run, export, dbfile, inspect, sqlfs, module + "/internal/testflags"}, direct: true},
		// The command is main and one call.
		{pkg: module + "/cmd/idem", idem: []string{module + "/cmd/idem/cli"}, direct: true},
	}
	// Every package of the library has its place in the list.
	listed := map[string]bool{}
	for _, tc := range layers {
		listed[tc.pkg] = true
	}
	for _, p := range goList(t, "list", module+"/internal/...", module+"/runner/...") {
		if !listed[p] {
			t.Errorf("package %s is not in the layering: add it with the idem packages it may import", p)
		}
	}
	for _, tc := range layers {
		t.Run(tc.pkg, func(t *testing.T) {
			t.Parallel()
			deps := goListDeps(t, tc.pkg, tc.direct)
			if len(deps) == 0 {
				t.Fatalf("go list found no dependencies of %s", tc.pkg)
			}
			for _, d := range deps {
				if d == module || strings.HasPrefix(d, module+"/") {
					if !slices.Contains(tc.idem, d) {
						t.Errorf("%s depends on %s: it may depend on no idem package but %v", tc.pkg, d, tc.idem)
					}
				}
				for _, f := range tc.forbidden {
					if d == f || strings.HasPrefix(d, f) {
						t.Errorf("%s depends on %s, which it must not (forbidden: %v)", tc.pkg, d, tc.forbidden)
					}
				}
			}
		})
	}
}

// goListDeps is `go list -f '{{join .Deps "\n"}}' pkg`: every package pkg
// depends on, directly or not; with direct, `{{join .Imports "\n"}}`.
func goListDeps(t *testing.T, pkg string, direct bool) []string {
	t.Helper()
	format := `{{join .Deps "\n"}}`
	if direct {
		format = `{{join .Imports "\n"}}`
	}
	return goList(t, "list", "-f", format, pkg)
}

// goList runs the go command with args and returns its output's fields.
func goList(t *testing.T, args ...string) []string {
	t.Helper()
	gobin := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := exec.LookPath(gobin); err != nil {
		if gobin, err = exec.LookPath("go"); err != nil {
			t.Fatalf("no go command to run go %v: %v", args, err)
		}
	}
	out, err := exec.Command(gobin, args...).Output()
	if err != nil {
		msg := ""
		if ee, ok := err.(*exec.ExitError); ok {
			msg = string(ee.Stderr)
		}
		t.Fatalf("go %v: %v\n%s", args, err, msg)
	}
	return strings.Fields(string(out))
}

// TestCLIImports: each file of cmd/idem/cli (tests aside) imports, of
// idem's packages, runner and internal/report (the printing helper:
// numbers, versions, usage errors) only: every command is a client of the public
// API (issue 46).
func TestCLIImports(t *testing.T) {
	t.Parallel()
	const module = "github.com/idem-dev/idem/"
	allowed := []string{module + "runner", module + "internal/report"}
	dir := filepath.Join("..", "cmd", "idem", "cli")
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no Go files in %s: %v", dir, err)
	}
	for _, path := range files {
		name := filepath.Base(path)
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range f.Imports {
			p := strings.Trim(imp.Path.Value, `"`)
			if strings.HasPrefix(p, module) && !slices.Contains(allowed, p) {
				t.Errorf("cmd/idem/cli/%s imports %s: a command calls runner (add what it needs to the public API)", name, strings.TrimPrefix(p, module))
			}
		}
	}
}

// TestExtensionImports: the Iceberg publisher (publish/iceberg, its own
// module) is an extension on the public API: each of its Go files imports,
// of idem's packages, runner and cmd/idem/cli (the Extension its commands
// plug into) and its own module's packages only, nothing under internal/
// (issue 46). A test that checks an internal package against what the
// publisher writes is the one exception, named here with its reason.
func TestExtensionImports(t *testing.T) {
	t.Parallel()
	const module = "github.com/idem-dev/idem/"
	allowed := []string{module + "runner", module + "cmd/idem/cli"}
	testOnly := map[string]string{
		// idem's own Iceberg reader read against tables iceberg-go wrote
		// (iceberg-go is a dependency of that module only).
		"inputtest/input_test.go " + module + "internal/lake": "test-only",
	}
	root := filepath.Join("..", "publish", "iceberg")
	n := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") {
			return err
		}
		n++
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		for _, imp := range f.Imports {
			p := strings.Trim(imp.Path.Value, `"`)
			if !strings.HasPrefix(p, module) || strings.HasPrefix(p, module+"publish/iceberg/") || slices.Contains(allowed, p) || testOnly[rel+" "+p] != "" {
				continue
			}
			t.Errorf("publish/iceberg/%s imports %s: an extension reads idem through runner (add what it needs to the public API)", rel, strings.TrimPrefix(p, module))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n == 0 {
		t.Fatalf("no Go files under %s", root)
	}
}
