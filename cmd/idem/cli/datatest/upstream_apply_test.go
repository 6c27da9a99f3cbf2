package datatest

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/idem-dev/idem/cmd/idem/cli/internal/clitest"
	"github.com/stretchr/testify/require"
)

// upstreamApplyProject writes a chain vc (versioned_changes over changes/*.jsonl,
// one batch per file) → src (a model of vc's active rows) → down
// (merge_by_key v2 applying src's changes) into dir, with one change file.
func upstreamApplyProject(t *testing.T, dir string) {
	clitest.WriteFile(t, filepath.Join(dir, "jobs", "vc.toml"), `name = "vc"
pipeline = "versioned_changes"
transform_version = 1
schema_version = 1
database = "../chain.duckdb"
[input]
path = "../changes/*.jsonl"
format = "jsonl"
mode = "files"
`+clitest.DuckdbSection)
	clitest.WriteFile(t, filepath.Join(dir, "jobs", "src.toml"), `name = "src"
pipeline = "select"
transform_version = 1
database = "../chain.duckdb"
[input]
upstream = ["vc"]
[transform]
sql = "models/src"
[target]
key = ["entity_id"]
`+clitest.DuckdbSection)
	clitest.WriteFile(t, filepath.Join(dir, "jobs", "models", "src", "v1.sql"), "SELECT entity_id, source_version, value FROM {{upstream:vc}} WHERE status = 'active'\n")
	clitest.WriteFile(t, filepath.Join(dir, "jobs", "down.toml"), `name = "down"
pipeline = "merge_by_key"
transform_version = 2
schema_version = 1
database = "../chain.duckdb"
[input]
upstream = ["src"]
[input.columns]
entity_id = "VARCHAR"
source_version = "BIGINT"
value = "VARCHAR"
[target]
key = ["entity_id"]
order_by = "source_version"
`+clitest.DuckdbSection)
	clitest.WriteFile(t, filepath.Join(dir, "changes", "b1.jsonl"),
		`{"change_id":"1","entity_id":"a","source_version":1,"operation":"upsert","value":"a1"}
{"change_id":"2","entity_id":"b","source_version":1,"operation":"upsert","value":"b1"}
`)
}

// upstreamApplySecondBatch writes the chain's second change file: a
// updated to a2, b deleted.
func upstreamApplySecondBatch(t *testing.T, dir string) {
	clitest.WriteFile(t, filepath.Join(dir, "changes", "b2.jsonl"),
		`{"change_id":"3","entity_id":"a","source_version":2,"operation":"upsert","value":"a2"}
{"change_id":"4","entity_id":"b","source_version":2,"operation":"delete","value":null}
`)
}

// TestUpstreamApplyCLI runs a chain whose last job applies only what
// changed upstream: first all rows, then nothing (skipped), then one
// update and one delete as one batch named by the upstream's snapshots;
// every snapshot of it reruns.
func TestUpstreamApplyCLI(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	upstreamApplyProject(t, dir)
	db := filepath.Join(dir, "chain.duckdb")
	jobs := filepath.Join(dir, "jobs")
	down := filepath.Join(jobs, "down.toml")

	code, out, errOut := clitest.InProcess(t, "run", jobs)
	require.Equal(t, 0, code, out+errOut)
	require.Contains(t, out, "down: applied (first load)\n  batch     upstream:src:0-1\n")
	require.Equal(t, []string{"a a1", "b b1"}, clitest.QueryStrs(t, db, `SELECT entity_id || ' ' || value FROM down ORDER BY ALL`))

	code, out, errOut = clitest.InProcess(t, "run", down)
	require.Equal(t, 0, code, out+errOut)
	require.Contains(t, out, "down: skipped: nothing changed\n")

	upstreamApplySecondBatch(t, dir)
	code, out, errOut = clitest.InProcess(t, "run", jobs)
	require.Equal(t, 0, code, out+errOut)
	require.Contains(t, out, "down: applied [input changed]\n  batch     upstream:src:1-2\n  snapshot  2\n  upstream  src 1 → 2\n  rows in   2\n")
	require.Contains(t, out, "  outcomes  accepted 2\n")
	require.Equal(t, []string{"a a2"}, clitest.QueryStrs(t, db, `SELECT entity_id || ' ' || value FROM down ORDER BY ALL`))
	require.Equal(t, []string{"b 1"}, clitest.QueryStrs(t, db, `SELECT entity_id || ' ' || idem_order FROM down_tombstones`))

	// Rolled back to the snapshot that pinned src 1, the job meets range
	// 1-2 again: already committed, nothing written.
	code, out, errOut = clitest.InProcess(t, "rollback", down, "--to-snapshot", "1")
	require.Equal(t, 0, code, out+errOut)
	before := clitest.CaptureState(t, db)
	code, out, errOut = clitest.InProcess(t, "run", down)
	require.Equal(t, 0, code, out+errOut)
	require.Contains(t, out, "down: already_committed")
	require.Contains(t, out, "  batch     upstream:src:1-2\n")
	require.Equal(t, before, clitest.CaptureState(t, db))

	// Every snapshot of down reruns, the rollback's included: the replay
	// reads src's changes between the snapshots each batch names, from
	// src's history; --deep reruns src's pinned snapshot too.
	for s := 1; s <= 3; s++ {
		code, out, errOut = clitest.InProcess(t, "rerun", down, "--snapshot", fmt.Sprint(s), "--json")
		require.Equal(t, 0, code, out+errOut)
		require.Contains(t, out, `"reproduced":true`, "snapshot %d", s)
	}
	code, out, errOut = clitest.InProcess(t, "rerun", down, "--deep")
	require.Equal(t, 0, code, out+errOut)
	require.Contains(t, out, "down: snapshot 3 reproduced")
	require.Contains(t, out, "src: snapshot 1 reproduced")
	require.Equal(t, before, clitest.CaptureState(t, db), "a rerun only reads the database")
}

// TestUpstreamApplyRefused: an apply run over upstream changes takes no
// batch id or source positions, a generic pipeline reads one upstream, and
// a declared column the upstream lacks names its columns. Each is exit 2
// with every idem table unchanged.
func TestUpstreamApplyRefused(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	upstreamApplyProject(t, dir)
	db := filepath.Join(dir, "chain.duckdb")
	jobs := filepath.Join(dir, "jobs")
	code, out, errOut := clitest.InProcess(t, "run", jobs)
	require.Equal(t, 0, code, out+errOut)
	down, err := os.ReadFile(filepath.Join(jobs, "down.toml"))
	require.NoError(t, err)
	for _, tc := range []struct {
		name, job string
		args      []string
		want      string
	}{
		{"batch id", string(down), []string{"--batch-id", "x"}, "--batch-id: job down applies the changes of its upstream jobs"},
		{"from to", string(down), []string{"--from", "0", "--to", "1"}, "--from/--to: job down applies the changes of its upstream jobs"},
		{"two upstreams", strings.Replace(string(down), `upstream = ["src"]`, `upstream = ["src", "vc"]`, 1),
			nil, "job down: pipeline merge_by_key applies the changes of one upstream job; [input] upstream names 2"},
		{"missing column", strings.Replace(string(down), `value = "VARCHAR"`, "value = \"VARCHAR\"\nprice = \"DOUBLE\"", 1),
			nil, "job down: [input.columns] price is not a column of upstream src (it has entity_id, source_version, value)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// A new upstream change, so that the run has work to refuse.
			clitest.WriteFile(t, filepath.Join(dir, "changes", "b-"+tc.name+".jsonl"),
				`{"change_id":"`+tc.name+`","entity_id":"c","source_version":1,"operation":"upsert","value":"c1"}`+"\n")
			for _, j := range []string{"vc.toml", "src.toml"} {
				code, out, errOut := clitest.InProcess(t, "run", filepath.Join(jobs, j))
				require.Equal(t, 0, code, out+errOut)
			}
			path := filepath.Join(jobs, "down-"+tc.name+".toml")
			clitest.WriteFile(t, path, tc.job)
			t.Cleanup(func() { os.Remove(path) })
			before := clitest.CaptureState(t, db)
			code, out, errOut := clitest.InProcess(t, append([]string{"run", path}, tc.args...)...)
			require.Equal(t, 2, code, out+errOut)
			require.Contains(t, errOut, tc.want)
			require.Equal(t, before, clitest.CaptureState(t, db))
		})
	}
}

// TestUpstreamApplyPlan: plan names the range a run would apply and writes
// nothing.
func TestUpstreamApplyPlan(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	upstreamApplyProject(t, dir)
	db := filepath.Join(dir, "chain.duckdb")
	jobs := filepath.Join(dir, "jobs")
	code, out, errOut := clitest.InProcess(t, "run", jobs)
	require.Equal(t, 0, code, out+errOut)
	clitest.WriteFile(t, filepath.Join(dir, "changes", "b2.jsonl"),
		`{"change_id":"3","entity_id":"a","source_version":2,"operation":"upsert","value":"a2"}`+"\n")
	for _, j := range []string{"vc.toml", "src.toml"} {
		code, out, errOut := clitest.InProcess(t, "run", filepath.Join(jobs, j))
		require.Equal(t, 0, code, out+errOut)
	}
	before := clitest.CaptureState(t, db)
	code, out, errOut = clitest.InProcess(t, "plan", filepath.Join(jobs, "down.toml"))
	require.Equal(t, 0, code, out+errOut)
	require.Equal(t, "down: would be applied [input changed]\n  batch     upstream:src:1-2\n  snapshot  1\n  upstream  src 1 → 2\n", out[:strings.Index(out, "  job key")])
	require.True(t, strings.HasSuffix(out, "\n  sql       sealed; steps on one thread, upstream rows ORDER BY ALL\n"), out)
	require.Equal(t, before, clitest.CaptureState(t, db))
}

// TestUpstreamRollbackUnderApply: after its upstream is rolled back below
// the snapshot it applied, a job fed by the upstream's changes would read
// older versions as stale and keep rows the upstream no longer has; its
// next run realigns it instead (the rows of the keys the changes name are
// the upstream's, a deleted key comes back, a key the rollback removed
// goes), says so in its output and run log, and reruns reproduce it.
func TestUpstreamRollbackUnderApply(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	upstreamApplyProject(t, dir)
	db := filepath.Join(dir, "chain.duckdb")
	jobs := filepath.Join(dir, "jobs")
	down, src := filepath.Join(jobs, "down.toml"), filepath.Join(jobs, "src.toml")
	code, out, errOut := clitest.InProcess(t, "run", jobs)
	require.Equal(t, 0, code, out+errOut)
	upstreamApplySecondBatch(t, dir)
	code, out, errOut = clitest.InProcess(t, "run", jobs)
	require.Equal(t, 0, code, out+errOut)
	require.Equal(t, []string{"a a2"}, clitest.QueryStrs(t, db, `SELECT entity_id || ' ' || value FROM down ORDER BY ALL`))

	code, out, errOut = clitest.InProcess(t, "rollback", src, "--to-snapshot", "1")
	require.Equal(t, 0, code, out+errOut)
	rows := `SELECT entity_id || ' ' || value FROM %s ORDER BY ALL`
	require.Equal(t, []string{"a a1", "b b1"}, clitest.QueryStrs(t, db, fmt.Sprintf(rows, "src")))

	code, out, errOut = clitest.InProcess(t, "run", down)
	require.Equal(t, 0, code, out+errOut)
	require.Contains(t, out, "  note      upstream src was rolled back to snapshot 1 (its snapshot 3), below snapshot 2 that this job applied: the rows of the keys it changed since were taken as src has them, not kept as newer\n")
	require.Equal(t, clitest.QueryStrs(t, db, fmt.Sprintf(rows, "src")), clitest.QueryStrs(t, db, fmt.Sprintf(rows, "down")))
	require.Equal(t, []string{"1"}, clitest.QueryStrs(t, db, `SELECT count(*) FROM idem.runs WHERE job = 'down' AND message LIKE 'upstream src was rolled back%'`))
	code, out, errOut = clitest.InProcess(t, "run", down)
	require.Equal(t, 0, code, out+errOut)
	require.Contains(t, out, "down: skipped")
	for s := 1; s <= 3; s++ {
		code, out, errOut = clitest.InProcess(t, "rerun", down, "--snapshot", strconv.Itoa(s), "--json")
		require.Equal(t, 0, code, out+errOut)
		require.Contains(t, out, `"reproduced":true`, "snapshot %d", s)
	}
}
