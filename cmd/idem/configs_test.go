package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestEveryExampleConfigRuns runs each job file in configs/ from the
// repository root, as the README does, against a fresh database: the first
// run commits, running it again commits nothing new, and idem rerun of the
// latest snapshot reproduces its sha256.
func TestEveryExampleConfigRuns(t *testing.T) {
	root, err := filepath.Abs("../..")
	require.NoError(t, err)
	configs, err := filepath.Glob(filepath.Join(root, "configs", "*.toml"))
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(configs), 4)
	t.Chdir(root)
	for _, cfg := range configs {
		name := strings.TrimSuffix(filepath.Base(cfg), ".toml")
		t.Run(name, func(t *testing.T) {
			db := filepath.Join(t.TempDir(), "idem.duckdb")
			rel := filepath.Join("configs", name+".toml")
			code, out, errOut := cli(t, "run", rel, "--db", db, "--json")
			require.Equal(t, 0, code, errOut)
			require.NotEmpty(t, strings.TrimSpace(out))
			decisions := jsonDecisions(t, out)
			require.NotEmpty(t, decisions)
			for _, d := range decisions {
				require.Contains(t, []string{"loaded", "applied"}, d, out)
			}

			code, out, errOut = cli(t, "run", rel, "--db", db, "--json")
			require.Equal(t, 0, code, errOut)
			for _, d := range jsonDecisions(t, out) {
				require.Contains(t, []string{"skipped", "already_committed"}, d, "a second run of %s must commit nothing: %s", name, out)
			}

			// A pinned re-run of the latest snapshot rebuilds it and proves
			// its sha256: rerun computes the key parts as the run did.
			code, out, errOut = cli(t, "rerun", rel, "--db", db, "--json")
			require.Equal(t, 0, code, "rerun of %s: %s %s", name, out, errOut)
			var rr struct {
				Reproduced bool   `json:"reproduced"`
				SHA256     string `json:"sha256"`
				Rebuilt    string `json:"rebuilt_sha256"`
			}
			require.NoError(t, json.Unmarshal([]byte(out), &rr), out)
			require.True(t, rr.Reproduced, out)
			require.Equal(t, rr.SHA256, rr.Rebuilt)
			require.Len(t, rr.SHA256, 64)

			code, _, errOut = cli(t, "lint", rel)
			require.Equal(t, 0, code, "lint of %s: %s", name, errOut)
		})
	}
}

// jsonDecisions reads the decision of each run object printed by run --json
// (one object, or one per batch for files and chunked jobs).
func jsonDecisions(t *testing.T, out string) []string {
	t.Helper()
	var decisions []string
	dec := json.NewDecoder(strings.NewReader(out))
	for dec.More() {
		var v any
		require.NoError(t, dec.Decode(&v), out)
		collectDecisions(v, &decisions)
	}
	return decisions
}

func collectDecisions(v any, out *[]string) {
	switch x := v.(type) {
	case map[string]any:
		if d, ok := x["decision"].(string); ok {
			*out = append(*out, d)
			return
		}
		for _, k := range []string{"runs", "batches", "results"} {
			if list, ok := x[k]; ok {
				collectDecisions(list, out)
			}
		}
	case []any:
		for _, e := range x {
			collectDecisions(e, out)
		}
	}
}
