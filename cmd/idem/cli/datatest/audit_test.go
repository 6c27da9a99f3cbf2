package datatest

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idem-dev/idem/cmd/idem/cli/internal/clitest"
)

// TestAudits: each kind of [[audit]], on a file job and on a model over
// it, checked before COMMIT. An error audit that finds violations fails
// the run (exit 1) naming them, with every idem table unchanged, and the
// project's downstream job is blocked; a warn audit commits and says what
// it found in the output, --json and the run log; audits that pass say
// nothing; a bad [[audit]] is exit 2 naming its line.
func TestAudits(t *testing.T) {
	t.Parallel()
	jobFile := func(audits string) string {
		return `name = "stock"
pipeline = "merge_by_key"
transform_version = 1
schema_version = 1
database = "stock.duckdb"
[input]
path = "in.csv"
[input.columns]
sku = "BIGINT"
status = "VARCHAR"
qty = "BIGINT"
[target]
key = ["sku"]
` + clitest.DuckdbSection + audits
	}
	model := `name = "totals"
pipeline = "select"
transform_version = 1
database = "stock.duckdb"
[input]
upstream = ["stock"]
[transform]
sql = "models/totals"
[target]
key = ["status"]
` + clitest.DuckdbSection
	const data = "sku,status,qty\n1,open,5\n2,open,\n3,lost,2\n"
	cases := []struct {
		name, audits string
		code         int
		want         []string
		modelAudits  string
	}{
		{"all pass", `[[audit]]
kind = "unique"
columns = ["sku"]
[[audit]]
kind = "accepted_values"
column = "status"
values = ["open", "lost"]
[[audit]]
kind = "row_count"
min = 1
max = 10
`, 0, []string{"stock: applied (first load)"}, ""},
		{"not_null fails", `[[audit]]
kind = "not_null"
columns = ["qty"]
`, 1, []string{"job stock: audit not_null_qty (not_null) found 1 violation(s): sku=2, status=open, qty=NULL, idem_status=active; nothing committed"}, ""},
		{"accepted_values fails", `[[audit]]
kind = "accepted_values"
column = "status"
values = ["open"]
`, 1, []string{"audit accepted_values_status (accepted_values) found 1 violation(s): status=lost, idem_rows=1"}, ""},
		{"row_count fails", `[[audit]]
name = "enough"
kind = "row_count"
min = 5
`, 1, []string{"audit enough (row_count) found 1 violation(s): 3 rows, expected at least 5"}, ""},
		{"sql fails", `[[audit]]
name = "no_empty_open"
kind = "sql"
sql = "SELECT sku FROM {{table}} WHERE status = 'open' AND qty IS NULL"
`, 1, []string{"audit no_empty_open (sql) found 1 violation(s): sku=2"}, ""},
		{"warn commits", `[[audit]]
kind = "not_null"
columns = ["qty"]
severity = "warn"
`, 0, []string{"  audit     not_null_qty (not_null, warn): 1 violation(s): sku=2, status=open, qty=NULL, idem_status=active\n"}, ""},
		{name: "a model's audit", modelAudits: `[[audit]]
kind = "row_count"
max = 1
`, code: 1, want: []string{"stock: applied (first load)", "job totals: audit row_count (row_count) found 1 violation(s): 2 rows, expected at most 1; nothing committed"}},
		{"sql reading another table is refused at load", `[[audit]]
kind = "sql"
sql = "SELECT * FROM idem.state"
`, 2, []string{"audit sql"}, ""},
		{"unknown kind", `[[audit]]
kind = "unique_ish"
`, 2, []string{"stock.toml:16: audit[1]: unknown audit kind \"unique_ish\""}, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			clitest.WriteFile(t, filepath.Join(dir, "stock.toml"), jobFile(c.audits))
			clitest.WriteFile(t, filepath.Join(dir, "totals.toml"), model+c.modelAudits)
			clitest.WriteFile(t, filepath.Join(dir, "models", "totals", "v1.sql"), "SELECT status, sum(qty) AS qty FROM {{upstream:stock}} GROUP BY status\n")
			clitest.WriteFile(t, filepath.Join(dir, "in.csv"), data)
			db := filepath.Join(dir, "stock.duckdb")
			code, out, errOut := clitest.InProcess(t, "run", dir)
			require.Equal(t, c.code, code, out+errOut)
			for _, w := range c.want {
				require.Contains(t, out+errOut, w)
			}
			switch c.code {
			case 1:
				if c.modelAudits != "" {
					require.Equal(t, []string{"stock 1"}, clitest.QueryStrs(t, db, `SELECT job || ' ' || count(*) FROM idem.snapshots GROUP BY job`))
					return
				}
				// Nothing committed: no snapshot, and a second try leaves
				// every idem table as the first did.
				require.Contains(t, out+errOut, "totals: blocked")
				require.Equal(t, []string{"0 0"}, clitest.QueryStrs(t, db, `SELECT (SELECT count(*) FROM idem.snapshots) || ' ' || (SELECT count(*) FROM idem.ledger)`))
				before := clitest.CaptureState(t, db)
				code, out, errOut = clitest.InProcess(t, "run", filepath.Join(dir, "stock.toml"))
				require.Equal(t, 1, code, out+errOut)
				require.Equal(t, before, clitest.CaptureState(t, db))
			case 0:
				require.Contains(t, out, "totals: loaded")
				// An audit added after a snapshot does not stop its rerun:
				// a rerun replays what was committed.
				clitest.WriteFile(t, filepath.Join(dir, "stock.toml"), jobFile(c.audits+"[[audit]]\nname = \"later\"\nkind = \"row_count\"\nmax = 0\n"))
				code, out, errOut = clitest.InProcess(t, "rerun", filepath.Join(dir, "stock.toml"), "--snapshot", "1", "--json")
				require.Equal(t, 0, code, out+errOut)
				require.Contains(t, out, `"reproduced":true`)
			}
			if c.name == "warn commits" {
				require.Equal(t, []string{"audit not_null_qty (not_null, warn) found 1 violation(s)"},
					clitest.QueryStrs(t, db, `SELECT message FROM idem.runs WHERE job = 'stock' AND decision = 'applied'`))
				code, out, errOut = clitest.InProcess(t, "run", filepath.Join(dir, "stock.toml"), "--json")
				require.Equal(t, 0, code, out+errOut)
			}
		})
	}
}

// TestAuditRelationshipsAndChange: a relationships audit checks each value
// against another job's target as last committed, and a row_count's
// max_change_pct against the job's previous snapshot.
func TestAuditRelationshipsAndChange(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	clitest.WriteFile(t, filepath.Join(dir, "ref.toml"), `name = "ref"
pipeline = "merge_by_key"
transform_version = 1
schema_version = 1
database = "stock.duckdb"
[input]
path = "ref1.csv"
[input.columns]
status = "VARCHAR"
label = "VARCHAR"
[target]
key = ["status"]
`+clitest.DuckdbSection)
	clitest.WriteFile(t, filepath.Join(dir, "stock.toml"), `name = "stock"
pipeline = "merge_by_key"
transform_version = 1
schema_version = 1
database = "stock.duckdb"
[input]
path = "in1.csv"
[input.columns]
sku = "BIGINT"
status = "VARCHAR"
[target]
key = ["sku"]
`+clitest.DuckdbSection+`[[audit]]
kind = "relationships"
column = "status"
to = "ref.status"
[[audit]]
name = "steady"
kind = "row_count"
max_change_pct = 50.0
`)
	clitest.WriteFile(t, filepath.Join(dir, "ref1.csv"), "status,label\nopen,Open\n")
	clitest.WriteFile(t, filepath.Join(dir, "ref2.csv"), "status,label\nlost,Lost\n")
	clitest.WriteFile(t, filepath.Join(dir, "in1.csv"), "sku,status\n1,open\n2,lost\n3,lost\n4,\n")
	clitest.WriteFile(t, filepath.Join(dir, "in2.csv"), "sku,status\n5,open\n6,open\n7,open\n")
	ref, stock := filepath.Join(dir, "ref.toml"), filepath.Join(dir, "stock.toml")
	run := func(want int, args ...string) string {
		t.Helper()
		code, out, errOut := clitest.InProcess(t, args...)
		require.Equal(t, want, code, out+errOut)
		return out + errOut
	}
	run(0, "run", ref)
	require.Contains(t, run(1, "run", stock), "audit relationships_status (relationships) found 1 violation(s): status=lost, idem_rows=2; nothing committed")
	run(0, "run", ref, "--input", filepath.Join(dir, "ref2.csv"))
	require.Contains(t, run(0, "run", stock), "stock: applied (first load)")
	// 4 rows, then 7: a change of 75%.
	require.Contains(t, run(1, "run", stock, "--input", filepath.Join(dir, "in2.csv")), "audit steady (row_count) found 1 violation(s): 7 rows against 4 at snapshot 1, a change of 75.0%, above 50%")
}
