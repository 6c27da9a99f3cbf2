package job_test

import (
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestAuditsLoad: each [[audit]] refusal names its line and what to write;
// good audits bind in file order with their default names and severity.
func TestAuditsLoad(t *testing.T) {
	t.Parallel()
	base := "name = \"j\"\npipeline = \"versioned_changes\"\ntransform_version = 1\nschema_version = 1\n[input]\npath = \"in.jsonl\"\n"
	cases := []struct{ name, audits, want string }{
		{"no kind", "[[audit]]\ncolumns = [\"a\"]\n", "job.toml:7: audit[1]: an audit names its kind"},
		{"unique without columns", "[[audit]]\nkind = \"unique\"\n", "job.toml:7: audit[1]: a unique audit names its columns"},
		{"accepted_values without values", "[[audit]]\nkind = \"accepted_values\"\ncolumn = \"s\"\n", "an accepted_values audit names its column"},
		{"row_count without bounds", "[[audit]]\nkind = \"row_count\"\n", "a row_count audit sets min, max, max_change_pct or several"},
		{"row_count min above max", "[[audit]]\nkind = \"row_count\"\nmin = 5\nmax = 1\n", "row_count min 5 is above max 1"},
		{"sql that is not one SELECT", "[[audit]]\nkind = \"sql\"\nsql = \"DELETE FROM x\"\n", "a sql audit is one SELECT"},
		{"two SELECTs", "[[audit]]\nkind = \"sql\"\nsql = \"SELECT 1; SELECT 2\"\n", "a sql audit is one SELECT"},
		{"bad severity", "[[audit]]\nkind = \"unique\"\ncolumns = [\"a\"]\nseverity = \"fatal\"\n", `severity must be "error" or "warn" (got "fatal")`},
		{"twice", "[[audit]]\nkind = \"unique\"\ncolumns = [\"a\"]\n[[audit]]\nkind = \"unique\"\ncolumns = [\"a\"]\n", "job.toml:10: audit[2]: audit unique_a is declared twice"},
		{"relationships without to", "[[audit]]\nkind = \"relationships\"\ncolumn = \"a\"\n", `a relationships audit names its column = "..." and to = "JOB.COLUMN"`},
		{"negative change", "[[audit]]\nkind = \"row_count\"\nmax_change_pct = -1.0\n", "row_count max_change_pct must not be negative"},
		{"bad name", "[[audit]]\nname = \"a b\"\nkind = \"unique\"\ncolumns = [\"a\"]\n", `audit name "a b" must be letters`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			_, msg := loadJobText(t, base+c.audits, nil)
			require.Contains(t, msg, c.want)
		})
	}
	j, msg := loadJobText(t, base+"[[audit]]\nkind = \"unique\"\ncolumns = [\"entity_id\"]\n[[audit]]\nname = \"few\"\nkind = \"row_count\"\nmax = 9\nseverity = \"warn\"\n", nil)
	require.Empty(t, msg)
	require.Len(t, j.Audits, 2)
	require.Equal(t, []string{"unique_entity_id error 7", "few warn 10"}, []string{
		j.Audits[0].Name + " " + j.Audits[0].Severity + " " + strconv.Itoa(j.Audits[0].Line), j.Audits[1].Name + " " + j.Audits[1].Severity + " " + strconv.Itoa(j.Audits[1].Line)})
}
