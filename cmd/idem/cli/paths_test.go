package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/idem-dev/idem/cmd/idem/cli/internal/clitest"
	"github.com/stretchr/testify/require"
)

// TestJobPathsResolveFromJobFolder: a job file's database, input and
// pipeline folder are read from the job file's folder, so the same job runs
// from its parent folder, from its own folder and from anywhere else (given
// its absolute path) against the same database, and a files-mode job finds
// the files it committed whatever the working directory.
func TestJobPathsResolveFromJobFolder(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	proj := filepath.Join(root, "route_stats")
	code, _, errOut := clitest.InProcess(t, "init", proj)
	require.Equal(t, 0, code, errOut)
	require.NoDirExists(t, filepath.Join(proj, "data")) // the database's folder is created by the first run
	job := filepath.Join(proj, "route_stats.toml")
	db := filepath.Join(proj, "data", "route_stats.duckdb")

	// From the parent folder: this failed with "no pipeline.toml in folder
	// ./route_stats" when paths were read from the working directory.
	r := clitest.RunCLI(t, root, "", "run", "route_stats/route_stats.toml", "--json")
	require.Equal(t, 0, r.Code, r.Stderr)
	require.Equal(t, []string{"applied"}, clitest.JSONDecisions(t, r.Stdout))
	require.FileExists(t, db)
	require.NoDirExists(t, filepath.Join(root, "data"))
	require.Equal(t, []string{"landing/example.jsonl"}, clitest.QueryStrs(t, db, `SELECT path FROM idem.files ORDER BY path`))
	before := clitest.CaptureState(t, db)

	// From its own folder and from elsewhere: the same database, the file
	// is known, nothing is applied again.
	elsewhere := t.TempDir()
	for _, c := range []struct{ dir, job string }{{proj, "route_stats.toml"}, {elsewhere, job}, {root, "route_stats/route_stats.toml"}} {
		r = clitest.RunCLI(t, c.dir, "", "run", c.job, "--json")
		require.Equal(t, 0, r.Code, "from %s: %s", c.dir, r.Stderr)
		require.Equal(t, []string{"skipped"}, clitest.JSONDecisions(t, r.Stdout), "from %s", c.dir)
		r = clitest.RunCLI(t, c.dir, "", "plan", c.job, "--json")
		require.Equal(t, 0, r.Code, r.Stderr)
		require.Contains(t, r.Stdout, `"decision":"skipped"`, "plan from %s", c.dir)
		r = clitest.RunCLI(t, c.dir, "", "lint", c.job)
		require.Equal(t, 0, r.Code, r.Stdout+r.Stderr)
	}
	require.Equal(t, before, clitest.CaptureState(t, db))

	// A new file is applied once, from another working directory, and
	// recorded relative to the job file's folder.
	clitest.WriteFile(t, filepath.Join(proj, "landing", "next.jsonl"), `{"id": 1, "value": "first, again", "updated_at": 2}`+"\n")
	r = clitest.RunCLI(t, elsewhere, "", "run", job, "--json")
	require.Equal(t, 0, r.Code, r.Stderr)
	require.Equal(t, []string{"applied"}, clitest.JSONDecisions(t, r.Stdout))
	require.Equal(t, []string{"landing/example.jsonl", "landing/next.jsonl"}, clitest.QueryStrs(t, db, `SELECT path FROM idem.files ORDER BY path`))

	// A committed file that changed is still refused, from any folder.
	clitest.WriteFile(t, filepath.Join(proj, "landing", "next.jsonl"), `{"id": 1, "value": "edited", "updated_at": 3}`+"\n")
	before = clitest.CaptureState(t, db)
	r = clitest.RunCLI(t, root, "", "run", "route_stats/route_stats.toml")
	require.Equal(t, 3, r.Code, r.Stderr)
	require.Contains(t, r.Stderr, "next.jsonl changed after it was committed")
	require.Equal(t, before, clitest.CaptureState(t, db))
}

// TestFilesRecordedBeforeStillKnown: a database written before file records
// were relative to the job file's folder holds paths relative to the
// working directory of its runs; its committed files are still found (by
// name) and not applied again.
func TestFilesRecordedBeforeStillKnown(t *testing.T) {
	t.Parallel()
	proj := filepath.Join(t.TempDir(), "proj")
	code, _, errOut := clitest.InProcess(t, "init", proj, "--pipeline", "events")
	require.Equal(t, 0, code, errOut)
	job := filepath.Join(proj, "events.toml")
	db := filepath.Join(proj, "data", "events.duckdb")
	r := clitest.RunCLI(t, proj, "", "run", job)
	require.Equal(t, 0, r.Code, r.Stderr)
	// Rewrite the record as the old rule stored it, run from the folder
	// above: "proj/landing/example.jsonl".
	clitest.ExecSQL(t, db, `UPDATE idem.files SET path = 'proj/landing/example.jsonl'`)
	before := clitest.CaptureState(t, db)
	r = clitest.RunCLI(t, proj, "", "run", job, "--json")
	require.Equal(t, 0, r.Code, r.Stderr)
	require.Equal(t, []string{"skipped"}, clitest.JSONDecisions(t, r.Stdout))
	require.Equal(t, before, clitest.CaptureState(t, db))

	clitest.WriteFile(t, filepath.Join(proj, "landing", "example.jsonl"), `{"id": 9, "value": "changed", "updated_at": 9}`+"\n")
	r = clitest.RunCLI(t, proj, "", "run", job)
	require.Equal(t, 3, r.Code, r.Stderr)
	require.Contains(t, r.Stderr, "example.jsonl changed after it was committed")
	require.Equal(t, before, clitest.CaptureState(t, db))
}

// TestJobWrittenForTheOldRule: a job whose paths were written relative to
// the working directory now points elsewhere; where the old reading names a
// file, the error says so and how to fix the job, and nothing is written.
func TestJobWrittenForTheOldRule(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	clitest.WriteFile(t, filepath.Join(root, "fixtures", "a.csv"), "id,species_id,year,license\n1,1,2000,CC0 1.0\n")
	old := "name = \"old\"\npipeline = \"sample\"\ntransform_version = 1\nschema_version = 1\ndatabase = \"data/old.duckdb\"\n[input]\npath = \"fixtures/a.csv\"\n"
	clitest.WriteFile(t, filepath.Join(root, "jobs", "old.toml"), old)
	newDB := filepath.Join(root, "jobs", "data", "old.duckdb")
	oldDB := filepath.Join(root, "data", "old.duckdb")

	// The input: read from jobs/, it does not exist; from the working
	// directory it does.
	r := clitest.RunCLI(t, root, "", "run", "jobs/old.toml")
	require.Equal(t, 1, r.Code, r.Stderr)
	require.Contains(t, r.Stderr, "jobs/fixtures/a.csv: no such file or directory")
	require.Contains(t, r.Stderr, `fixtures/a.csv read from the working directory does exist`)
	require.Contains(t, r.Stderr, `write "../fixtures/a.csv" in jobs/old.toml or pass --input fixtures/a.csv`)
	require.Empty(t, clitest.QueryStrs(t, newDB, `SELECT batch_id FROM idem.ledger`))
	require.NoFileExists(t, oldDB)

	// The database: a database made under the old rule exists in ./data;
	// the job must not start a new one in jobs/data.
	require.NoError(t, os.RemoveAll(filepath.Join(root, "jobs", "data")))
	r = clitest.RunCLI(t, root, "", "run", "jobs/old.toml", "--db", "data/old.duckdb", "--input", "fixtures/a.csv")
	require.Equal(t, 0, r.Code, r.Stderr)
	before := clitest.CaptureState(t, oldDB)
	for _, cmd := range []string{"run", "plan", "log", "export"} {
		args := []string{cmd, "jobs/old.toml"}
		if cmd == "export" {
			args = append(args, "--out", filepath.Join(root, "out.csv"))
		}
		r = clitest.RunCLI(t, root, "", args...)
		require.Equal(t, 2, r.Code, "%s: %s", cmd, r.Stderr)
		require.Contains(t, r.Stderr, "database jobs/data/old.duckdb (read from the job file's folder) does not exist; data/old.duckdb read from the working directory does exist", cmd)
		require.Contains(t, r.Stderr, `write "../data/old.duckdb" in jobs/old.toml or pass --db data/old.duckdb`, cmd)
		require.NoDirExists(t, filepath.Join(root, "jobs", "data"), cmd)
		require.Equal(t, before, clitest.CaptureState(t, oldDB), cmd)
	}

	// The pipeline folder.
	clitest.WriteFile(t, filepath.Join(root, "pipes", "p", "pipeline.toml"), "name = \"p\"\nmode = \"refresh\"\ncolumns = [{ name = \"a\", type = \"VARCHAR\" }]\n")
	clitest.WriteFile(t, filepath.Join(root, "jobs", "pipe.toml"), strings.Replace(old, `pipeline = "sample"`, `pipeline = "pipes/p"`, 1))
	r = clitest.RunCLI(t, root, "", "run", "jobs/pipe.toml")
	require.Equal(t, 2, r.Code, r.Stderr)
	require.Contains(t, r.Stderr, "jobs/pipe.toml:2: pipeline: no folder jobs/pipes/p with a pipeline.toml")
	require.Contains(t, r.Stderr, "pipes/p read from the working directory does exist")
	require.Contains(t, r.Stderr, "a pipeline folder lies inside the job file's folder")

	// From the job's own folder nothing differs between the rules, and no
	// hint is given.
	r = clitest.RunCLI(t, filepath.Join(root, "jobs"), "", "run", "old.toml")
	require.Equal(t, 1, r.Code, r.Stderr)
	require.NotContains(t, r.Stderr, "working directory")
}

// TestDatabaseFolderCreated: a writing command creates the database's
// folders on the first run (plan having said "apply"); a reading command on
// a database in a missing folder fails and creates nothing.
func TestDatabaseFolderCreated(t *testing.T) {
	t.Parallel()
	e := newBadInputEnv(t, "")
	dir := filepath.Join(e.dir, "new", "nested")
	db := filepath.Join(dir, "state.duckdb")
	for _, args := range [][]string{
		{"log", e.changes, "--db", db},
		{"export", e.changes, "--db", db, "--out", filepath.Join(e.dir, "out.csv")},
		{"query", "--db", db, "SELECT 1"},
		{"diff", e.changes, "--db", db, "--from", "1", "--to", "1"},
	} {
		code, _, errOut := clitest.InProcess(t, args...)
		require.Equal(t, 1, code, "%v: %s", args, errOut)
		require.Contains(t, errOut, "does not exist", args)
		require.NoDirExists(t, filepath.Join(e.dir, "new"), args)
	}
	code, out, errOut := clitest.InProcess(t, "plan", e.changes, "--db", db, "--json")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, `"decision":"applied"`)
	require.NoDirExists(t, filepath.Join(e.dir, "new"))

	code, out, errOut = clitest.InProcess(t, "run", e.changes, "--db", db, "--json")
	require.Equal(t, 0, code, errOut)
	require.Equal(t, []string{"applied"}, clitest.JSONDecisions(t, out))
	require.Equal(t, []int64{1}, clitest.QueryInts(t, db, `SELECT snapshot FROM idem.ledger`))
}
