package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestInitScaffoldRunsEndToEnd: idem init writes a pipeline and a job that
// lint clean and run from the new folder; new files are taken once each;
// init never overwrites.
func TestInitScaffoldRunsEndToEnd(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "proj")
	code, out, errOut := cli(t, "init", dir, "--pipeline", "events")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "next: cd "+dir+" && idem run events.toml")
	for _, f := range []string{"events.toml", "landing/example.jsonl", "events/pipeline.toml", "events/schema/v1.sql",
		"events/transform/v1/01_stage.sql", "events/transform/v1/02_rank.sql", "events/transform/v1/03_outcomes.sql", "events/transform/v1/04_commit.sql"} {
		require.FileExists(t, filepath.Join(dir, f))
	}

	r := runCLI(t, dir, "", "lint", "events.toml")
	require.Equal(t, 0, r.code, r.stdout+r.stderr)
	require.Contains(t, r.stdout, "0 error(s), 0 warning(s)")

	r = runCLI(t, dir, "", "run", "events.toml", "--json")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, `"outcomes":{"accepted":2,"invalid_id":1,"invalid_rule:value_present":1,"superseded_in_batch":1}`)
	db := filepath.Join(dir, "data", "events.duckdb")
	require.Equal(t, []string{"1 first active", "2 second, newer active"}, queryStrs(t, db, `SELECT id || ' ' || value || ' ' || idem_status FROM events ORDER BY id`))

	writeFile(t, filepath.Join(dir, "landing", "next.jsonl"), `{"id": 1, "value": "first, again", "updated_at": 2}`+"\n")
	r = runCLI(t, dir, "", "run", "events.toml")
	require.Equal(t, 0, r.code, r.stderr)
	r = runCLI(t, dir, "", "run", "events.toml", "--json")
	require.Contains(t, r.stdout, `"decision":"skipped"`)
	require.Equal(t, []string{"1 first, again active", "2 second, newer active"}, queryStrs(t, db, `SELECT id || ' ' || value || ' ' || idem_status FROM events ORDER BY id`))

	// Never overwrites.
	before, err := os.ReadFile(filepath.Join(dir, "events.toml"))
	require.NoError(t, err)
	code, _, errOut = cli(t, "init", dir, "--pipeline", "events")
	require.Equal(t, 2, code)
	require.Contains(t, errOut, "already exists")
	after, err := os.ReadFile(filepath.Join(dir, "events.toml"))
	require.NoError(t, err)
	require.Equal(t, before, after)

	code, _, errOut = cli(t, "init", dir, "--pipeline", "bad-name")
	require.Equal(t, 2, code)
	require.Contains(t, errOut, `pipeline name "bad-name"`)
}
