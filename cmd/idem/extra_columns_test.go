package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/idem-dev/idem/internal/job"

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
			j := newGuardJob(t)
			text, err := os.ReadFile(j.file)
			require.NoError(t, err)
			text = []byte(strings.Replace(string(text), `format = "jsonl"`, `format = "`+tc.format+`"`, 1))
			writeText(t, j.file, string(text))
			j.apply("--input", j.input("b0.jsonl")) // an empty first batch: the database exists
			in := filepath.Join(j.dir, tc.name)
			writeText(t, in, tc.text)
			before := captureState(t, j.db)
			r := j.run("--input", in)
			require.Equal(t, job.ExitFailure, r.code, r.stderr)
			field := map[string]string{"jsonl": "field", "csv": "column"}[tc.format]
			require.Contains(t, r.stderr, "input "+in+": unexpected "+field+` "extra"`)
			require.Contains(t, r.stderr, `[input] extra_columns = "ignore" skips it`)
			require.Equal(t, before, captureState(t, j.db), "a refused input committed something")

			writeText(t, j.file, insertAfter(t, string(text), "[input]\n", "extra_columns = \"ignore\"\n"))
			res := j.apply("--input", in)
			require.Equal(t, job.DecisionApplied, res.Decision)
			require.Equal(t, map[string]int64{"accepted": 2}, res.Outcomes)
			want := []string{in + ": extra"}
			if tc.format == "jsonl" {
				want = append(want, in+": zz")
			}
			require.Equal(t, want, res.IgnoredColumns)
			require.Equal(t, "ignore", res.Parts.Config["extra_columns"])
			rows := j.query(`SELECT entity_id, value FROM customer_state ORDER BY entity_id`)
			require.Equal(t, [][]any{{"e-1", "v"}, {"e-2", "w"}}, rows)

			human := j.run("--input", in, "--batch-id", "again")
			require.Equal(t, 0, human.code, human.stderr)
			require.Contains(t, human.stdout, "  ignored   "+in+": extra")
			// The snapshot is reproducible under the recorded setting.
			rr := callIdem(t, "rerun", j.file)
			require.Equal(t, 0, rr.code, rr.stderr)
		})
	}
	t.Run("bad value", func(t *testing.T) {
		t.Parallel()
		j := newGuardJob(t)
		text, err := os.ReadFile(j.file)
		require.NoError(t, err)
		writeText(t, j.file, insertAfter(t, string(text), "[input]\n", "extra_columns = \"drop\"\n"))
		r := j.run()
		require.Equal(t, job.ExitUsage, r.code, r.stderr)
		require.Contains(t, r.stderr, `input.extra_columns: must be "error" or "ignore" (got "drop")`)
	})
}

// insertAfter inserts add after the first occurrence of mark in text.
func insertAfter(t *testing.T, text, mark, add string) string {
	t.Helper()
	i := strings.Index(text, mark)
	require.GreaterOrEqual(t, i, 0, "no %q in %q", mark, text)
	return text[:i+len(mark)] + add + text[i+len(mark):]
}
