package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/idem-dev/idem/cmd/idem/cli/internal/clitest"
	"github.com/stretchr/testify/require"
)

// FuzzMain runs the CLI in-process with arbitrary arguments (one per line of
// the fuzzed string) in a sandbox folder holding a refresh job, an apply job
// and their inputs: never a panic, always an exit code of SPEC section 9, and
// a failure always says why on stderr (and, with --json, as one JSON object
// on stdout).
func FuzzMain(f *testing.F) {
	for _, s := range []string{
		"version",
		"--help",
		"",
		"nonsense",
		"run",
		"run\njob.toml",
		"run\njob.toml\n--json",
		"run\nmissing.toml",
		"run\nchanges.toml\n--from\n0\n--to\n5",
		"run\nchanges.toml\n--from\n5\n--to\n1",
		"run\nchanges.toml\n--from\n0",
		"run\nchanges.toml\n--epoch\n7\n--json",
		"run\nchanges.toml\n--expect-parent\n3",
		"run\nchanges.toml\n--batch-id\nb'1",
		"run\njob.toml\n--threads\n-3",
		"run\njob.toml\n--memory-limit\nbanana",
		"run\njob.toml\n--wait\nxyz",
		"run\njob.toml\n--input\n*.csv",
		"run\njob.toml\n--db\nother.duckdb",
		"plan\njob.toml",
		"plan\nchanges.toml\n--json",
		"query\n--db\ndb.duckdb\nselect 1",
		"query\n--db\ndb.duckdb\n--format\ncsv\nselect * from idem.jobs",
		"query\n--db\nnope.duckdb\nselect 1",
		"log\njob.toml\n--json",
		"fence\nchanges.toml",
	} {
		f.Add(s)
	}
	root, err := filepath.Abs("../../..")
	require.NoError(f, err)
	csvData, err := os.ReadFile(filepath.Join(root, "fixtures/sample/occurrences-a.csv"))
	require.NoError(f, err)
	jsonlData, err := os.ReadFile(filepath.Join(root, "fixtures/changes/batch-1.jsonl"))
	require.NoError(f, err)
	f.Fuzz(func(t *testing.T, line string) {
		args := strings.Split(line, "\n")
		if line == "" {
			args = nil
		}
		for _, a := range args {
			// Stay inside the sandbox: no paths that leave it.
			if strings.ContainsAny(a, `/\~`) || strings.Contains(a, "..") {
				t.Skip()
			}
		}
		dir := t.TempDir()
		t.Chdir(dir)
		write := func(name string, data []byte) { require.NoError(t, os.WriteFile(name, data, 0o644)) }
		write("in.csv", csvData[:2000])
		write("in.jsonl", jsonlData)
		write("job.toml", []byte("name = \"sample\"\npipeline = \"sample\"\ntransform_version = 1\nschema_version = 1\ndatabase = \"db.duckdb\"\n[input]\npath = \"in.csv\"\n[target]\ntable = \"occurrence_sample\"\n"+clitest.DuckdbSection))
		write("changes.toml", []byte("name = \"customer_state\"\npipeline = \"versioned_changes\"\ntransform_version = 1\nschema_version = 1\ndatabase = \"db.duckdb\"\n[input]\npath = \"in.jsonl\"\n"+clitest.DuckdbSection))

		var stdout, stderr bytes.Buffer
		code := Main(context.Background(), args, &stdout, &stderr)
		require.Contains(t, []int{0, 1, 2, 3, 4}, code, "exit code")
		if code != 0 {
			require.NotEmpty(t, strings.TrimSpace(stderr.String()), "a failure says why")
			require.NotContains(t, stderr.String(), "goroutine ", "no stack trace")
		}
		if code != 0 && len(args) > 0 && (args[0] == "run" || args[0] == "plan") && jsonFlag(args) && stdout.Len() > 0 {
			var v map[string]any
			require.NoError(t, json.Unmarshal(stdout.Bytes(), &v), "--json failure is one JSON object: %q", stdout.String())
			require.Contains(t, v, "error")
		}
	})
}

// jsonFlag reports whether args set --json as a flag (before any "--").
func jsonFlag(args []string) bool {
	for _, a := range args {
		if a == "--" {
			return false
		}
		if a == "--json" || a == "--json=true" {
			return true
		}
	}
	return false
}
