package clitest

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// JSONDecisions reads the decision of each run object printed by run --json
// (one object, or one per batch for files and chunked jobs).
func JSONDecisions(t *testing.T, out string) []string {
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
