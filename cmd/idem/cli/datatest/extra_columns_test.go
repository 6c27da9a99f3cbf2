package datatest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/idem-dev/idem/internal/report"

	"github.com/idem-dev/idem/cmd/idem/cli/internal/clitest"
	"github.com/stretchr/testify/require"
)

// [input] extra_columns: by default a column (or JSON field) the pipeline
// does not read refuses the input with exit 1, naming the file and the
// column, and nothing is committed; with "ignore" it is skipped, named in
// the run's output, and recorded in the key's config part.
func TestExtraColumns(t *testing.T) {
	t.Parallel()
	cases := []struct {
		format, name, text string
	}{
		{"jsonl", "b.jsonl", `{"change_id":"c-1","entity_id":"e-1","source_version":1,"operation":"upsert","value":"v","extra":"x"}` + "\n" +
			`{"change_id":"c-2","entity_id":"e-2","source_version":1,"operation":"upsert","value":"w","zz":1}` + "\n"},
		{"csv", "b.csv", "change_id,entity_id,source_version,operation,value,extra\nc-1,e-1,1,upsert,v,x\nc-2,e-2,1,upsert,w,y\n"},
	}
	for _, tc := range cases {
		t.Run(tc.format, func(t *testing.T) {
			t.Parallel()
			j := clitest.NewGuardJob(t)
			text, err := os.ReadFile(j.File)
			require.NoError(t, err)
			text = []byte(strings.Replace(string(text), `format = "jsonl"`, `format = "`+tc.format+`"`, 1))
			clitest.WriteText(t, j.File, string(text))
			j.Apply("--input", j.Input("b0.jsonl")) // an empty first batch: the database exists
			in := filepath.Join(j.Dir, tc.name)
			clitest.WriteText(t, in, tc.text)
			before := clitest.CaptureState(t, j.DB)
			r := j.Run("--input", in)
			require.Equal(t, report.ExitFailure, r.Code, r.Stderr)
			field := map[string]string{"jsonl": "field", "csv": "column"}[tc.format]
			require.Contains(t, r.Stderr, "input "+in+": unexpected "+field+` "extra"`)
			require.Contains(t, r.Stderr, `[input] extra_columns = "ignore" skips it`)
			require.Equal(t, before, clitest.CaptureState(t, j.DB), "a refused input committed something")

			clitest.WriteText(t, j.File, insertAfter(t, string(text), "[input]\n", "extra_columns = \"ignore\"\n"))
			res := j.Apply("--input", in)
			require.Equal(t, report.DecisionApplied, res.Decision)
			require.Equal(t, map[string]int64{"accepted": 2}, res.Outcomes)
			want := []string{in + ": extra"}
			if tc.format == "jsonl" {
				want = append(want, in+": zz")
			}
			require.Equal(t, want, res.IgnoredColumns)
			require.Equal(t, "ignore", res.Parts.Config["extra_columns"])
			rows := j.Query(`SELECT entity_id, value FROM customer_state ORDER BY entity_id`)
			require.Equal(t, [][]any{{"e-1", "v"}, {"e-2", "w"}}, rows)

			human := j.Run("--input", in, "--batch-id", "again")
			require.Equal(t, 0, human.Code, human.Stderr)
			require.Contains(t, human.Stdout, "  ignored   "+in+": extra")
			// The snapshot is reproducible under the recorded setting.
			rr := clitest.CallIdem(t, "rerun", j.File)
			require.Equal(t, 0, rr.Code, rr.Stderr)
		})
	}
	t.Run("bad value", func(t *testing.T) {
		t.Parallel()
		j := clitest.NewGuardJob(t)
		text, err := os.ReadFile(j.File)
		require.NoError(t, err)
		clitest.WriteText(t, j.File, insertAfter(t, string(text), "[input]\n", "extra_columns = \"drop\"\n"))
		r := j.Run()
		require.Equal(t, report.ExitUsage, r.Code, r.Stderr)
		require.Contains(t, r.Stderr, `input.extra_columns: must be "error" or "ignore" (got "drop")`)
	})
}

// insertAfter inserts add after the first occurrence of mark in text.
func insertAfter(t *testing.T, text, mark, add string) string {
	t.Helper()
	i := strings.Index(text, mark)
	require.GreaterOrEqual(t, i, 0, "no %q in %q", mark, text)
	return text[:i+len(mark)] + add + text[i+len(mark):]
}
