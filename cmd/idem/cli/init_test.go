package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/idem-dev/idem/cmd/idem/cli/internal/clitest"
	"github.com/stretchr/testify/require"
)

// TestInitScaffoldRunsEndToEnd: idem init writes a pipeline and a job that
// lint clean and run from the new folder; new files are taken once each;
// init never overwrites.
func TestInitScaffoldRunsEndToEnd(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "proj")
	code, out, errOut := clitest.InProcess(t, "init", dir, "--pipeline", "events")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "next: idem run "+filepath.Join(dir, "events.toml"))
	for _, f := range []string{"events.toml", "landing/example.jsonl", "events/pipeline.toml", "events/schema/v1.sql",
		"events/transform/v1/01_stage.sql", "events/transform/v1/02_rank.sql", "events/transform/v1/03_outcomes.sql", "events/transform/v1/04_commit.sql"} {
		require.FileExists(t, filepath.Join(dir, f))
	}

	r := clitest.RunCLI(t, dir, "", "lint", "events.toml")
	require.Equal(t, 0, r.Code, r.Stdout+r.Stderr)
	require.Contains(t, r.Stdout, "0 error(s), 0 warning(s)")

	r = clitest.RunCLI(t, dir, "", "run", "events.toml", "--json")
	require.Equal(t, 0, r.Code, r.Stderr)
	require.Contains(t, r.Stdout, `"outcomes":{"accepted":2,"invalid_id":1,"invalid_rule:value_present":1,"superseded_in_batch":1}`)
	db := filepath.Join(dir, "data", "events.duckdb")
	require.Equal(t, []string{"1 first active", "2 second, newer active"}, clitest.QueryStrs(t, db, `SELECT id || ' ' || value || ' ' || idem_status FROM events ORDER BY id`))

	clitest.WriteFile(t, filepath.Join(dir, "landing", "next.jsonl"), `{"id": 1, "value": "first, again", "updated_at": 2}`+"\n")
	r = clitest.RunCLI(t, dir, "", "run", "events.toml")
	require.Equal(t, 0, r.Code, r.Stderr)
	r = clitest.RunCLI(t, dir, "", "run", "events.toml", "--json")
	require.Contains(t, r.Stdout, `"decision":"skipped"`)
	require.Equal(t, []string{"1 first, again active", "2 second, newer active"}, clitest.QueryStrs(t, db, `SELECT id || ' ' || value || ' ' || idem_status FROM events ORDER BY id`))

	// Never overwrites.
	before, err := os.ReadFile(filepath.Join(dir, "events.toml"))
	require.NoError(t, err)
	code, _, errOut = clitest.InProcess(t, "init", dir, "--pipeline", "events")
	require.Equal(t, 2, code)
	require.Contains(t, errOut, "already exists")
	after, err := os.ReadFile(filepath.Join(dir, "events.toml"))
	require.NoError(t, err)
	require.Equal(t, before, after)

	code, _, errOut = clitest.InProcess(t, "init", dir, "--pipeline", "bad-name")
	require.Equal(t, 2, code)
	require.Contains(t, errOut, `pipeline name "bad-name"`)
}

// TestInitEachMode: idem init --mode apply|refresh scaffolds a pipeline
// that runs as generated: the first run commits, the second commits
// nothing, and lint finds no error. The refresh pipeline's commit step
// clears the target, so a changed input replaces the rows rather than
// adding to them.
func TestInitEachMode(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		mode, first, again string
		outcomes           string
	}{
		{"apply", "applied", "skipped", `"outcomes":{"accepted":2,"invalid_id":1,"invalid_rule:value_present":1,"superseded_in_batch":1}`},
		{"refresh", "loaded", "skipped", `"outcomes":{"accepted":2,"below_min_score":1,"invalid_id":1,"invalid_name":1,"repeated_id":1}`},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			t.Parallel()
			dir := filepath.Join(t.TempDir(), "proj")
			code, out, errOut := clitest.InProcess(t, "init", dir, "--mode", tc.mode, "--json")
			require.Equal(t, 0, code, errOut)
			require.Contains(t, out, `"mode":"`+tc.mode+`"`)
			job := filepath.Join(dir, "proj.toml")
			// In-process: the working directory is cmd/idem, not the
			// project's folder.
			r := clitest.CallIdem(t, "run", job, "--json")
			require.Equal(t, 0, r.Code, r.Stderr)
			require.Equal(t, []string{tc.first}, clitest.JSONDecisions(t, r.Stdout))
			require.Contains(t, r.Stdout, tc.outcomes)
			r = clitest.CallIdem(t, "run", job, "--json")
			require.Equal(t, 0, r.Code, r.Stderr)
			require.Equal(t, []string{tc.again}, clitest.JSONDecisions(t, r.Stdout))

			r = clitest.CallIdem(t, "lint", job)
			require.Equal(t, 0, r.Code, r.Stdout+r.Stderr)
			require.Contains(t, r.Stdout, "0 error(s)")
		})
	}

	t.Run("refresh replaces the target", func(t *testing.T) {
		t.Parallel()
		dir := filepath.Join(t.TempDir(), "scores")
		code, _, errOut := clitest.InProcess(t, "init", dir, "--mode", "refresh")
		require.Equal(t, 0, code, errOut)
		job := filepath.Join(dir, "scores.toml")
		db := filepath.Join(dir, "data", "scores.duckdb")
		code, _, errOut = clitest.InProcess(t, "run", job)
		require.Equal(t, 0, code, errOut)
		require.Equal(t, []string{"1 ada 90", "2 grace 80"}, clitest.QueryStrs(t, db, `SELECT id || ' ' || name || ' ' || score FROM scores ORDER BY id`))
		clitest.WriteFile(t, filepath.Join(dir, "input", "example.csv"), "id,name,score\n5,edsger,60\n")
		code, out, errOut := clitest.InProcess(t, "run", job, "--json")
		require.Equal(t, 0, code, errOut)
		require.Contains(t, out, `"changed":["input"]`)
		require.Equal(t, []string{"5 edsger 60"}, clitest.QueryStrs(t, db, `SELECT id || ' ' || name || ' ' || score FROM scores ORDER BY id`))
		require.Equal(t, []string{"5 accepted"}, clitest.QueryStrs(t, db, `SELECT id || ' ' || outcome FROM scores_outcomes`))
	})

	code, _, errOut := clitest.InProcess(t, "init", filepath.Join(t.TempDir(), "x"), "--mode", "stream")
	require.Equal(t, 2, code)
	require.Contains(t, errOut, `mode "stream": want apply, refresh or select`)
}

// TestInitSelect: idem init --mode select writes a model and the source
// job it reads, and tests of the model that idem test DIR passes; idem run
// DIR runs both in order (the source applied, then the model loaded from
// it), again commits nothing, and both lint clean.
func TestInitSelect(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "proj")
	code, out, errOut := clitest.InProcess(t, "init", dir, "--mode", "select", "--pipeline", "sales")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "next: idem run "+dir+"\n")
	require.Contains(t, out, "test: idem test "+dir+"\n")
	for _, f := range []string{"sales.toml", "sales_source.toml", "models/sales/v1.sql", "input/sales.csv", "tests/sales.toml"} {
		require.FileExists(t, filepath.Join(dir, f))
	}
	require.NoDirExists(t, filepath.Join(dir, "sales"), "a model needs no pipeline folder")

	// The scaffolded tests of the model pass, without a database.
	r := clitest.CallIdem(t, "test", dir)
	require.Equal(t, 0, r.Code, r.Stdout+r.Stderr)
	require.Contains(t, r.Stdout, "2 tests: 2 passed, 0 failed, 0 bad\n")
	require.NoDirExists(t, filepath.Join(dir, "data"))

	// In-process: the working directory is cmd/idem, not the project's.
	r = clitest.CallIdem(t, "run", dir, "--json")
	require.Equal(t, 0, r.Code, r.Stderr)
	var objs []map[string]any
	require.NoError(t, json.Unmarshal([]byte(r.Stdout), &objs), r.Stdout)
	require.Len(t, objs, 2)
	require.Equal(t, []any{"sales_source", "applied"}, []any{objs[0]["job"], objs[0]["decision"]})
	require.Equal(t, []any{"sales", "loaded"}, []any{objs[1]["job"], objs[1]["decision"]})
	db := filepath.Join(dir, "data", "sales.duckdb")
	require.Equal(t, []string{"books 2 19.75", "music 1 20.00"}, clitest.QueryStrs(t, db, `SELECT category || ' ' || items || ' ' || amount FROM sales ORDER BY category`))

	r = clitest.CallIdem(t, "run", dir, "--json")
	require.Equal(t, 0, r.Code, r.Stderr)
	require.Equal(t, []string{"already_committed", "skipped"}, clitest.JSONDecisions(t, r.Stdout))

	for _, j := range []string{"sales.toml", "sales_source.toml"} {
		r = clitest.CallIdem(t, "lint", filepath.Join(dir, j))
		require.Equal(t, 0, r.Code, r.Stdout+r.Stderr)
		require.Contains(t, r.Stdout, "0 error(s), 0 warning(s)", j)
	}

	code, _, errOut = clitest.InProcess(t, "init", dir, "--mode", "select", "--pipeline", "sales")
	require.Equal(t, 2, code)
	require.Contains(t, errOut, "already exists")
}
