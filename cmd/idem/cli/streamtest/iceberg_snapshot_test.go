package streamtest

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"

	_ "github.com/duckdb/duckdb-go/v2"
	"github.com/stretchr/testify/require"

	"github.com/idem-dev/idem/cmd/idem/cli/internal/clitest"
	"github.com/idem-dev/idem/internal/lake/laketest"
	"github.com/idem-dev/idem/internal/run"
)

// sampleColumns are the input columns of the built-in sample pipeline.
var sampleColumns = []laketest.Column{{ID: 1, Name: "id", Type: "long"}, {ID: 2, Name: "species_id", Type: "long"},
	{ID: 3, Name: "year", Type: "int"}, {ID: 4, Name: "license", Type: "string"}}

// lakeRows is a query of n occurrence rows from id first.
func lakeRows(first, n int) string {
	return fmt.Sprintf("SELECT i::BIGINT AS id, (i %% 3)::BIGINT AS species_id, 2020::INTEGER AS year, 'CC0 1.0' AS license FROM range(%d, %d) r(i)", first, first+n)
}

// newLake starts a test table in dir/lake/NAME with its own DuckDB.
func newLake(t *testing.T, dir, name, uuid string, cols []laketest.Column) *laketest.Table {
	t.Helper()
	db, err := sql.Open("duckdb", "")
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	tb, err := laketest.New(db, filepath.Join(dir, "lake", name), uuid, cols)
	require.NoError(t, err)
	return tb
}

func runJSON(t *testing.T, args ...string) run.Result {
	t.Helper()
	r := clitest.CallIdem(t, append(args, "--json")...)
	require.Equal(t, 0, r.Code, r.Stderr+r.Stdout)
	var res run.Result
	require.NoError(t, json.Unmarshal([]byte(r.Stdout), &res), r.Stdout)
	return res
}

// TestIcebergSnapshotRead: a refresh job reads the table's current
// snapshot, deletes applied; an unchanged lake skips, a moved one reloads
// and plan says so; every idem snapshot pins its lake snapshot and rerun
// reproduces it from that snapshot, and is refused (exit 3, naming both)
// once the lake expired it, or once an erasure removed rows the lake still
// holds.
func TestIcebergSnapshotRead(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	tb := newLake(t, dir, "occ", "5e1f0c2a-1111-4000-8000-000000000001", sampleColumns)
	jobFile := filepath.Join(dir, "sample.toml")
	db := filepath.Join(dir, "idem.duckdb")
	clitest.WriteFile(t, jobFile, `name = "sample"
pipeline = "sample"
transform_version = 1
schema_version = 1
database = "idem.duckdb"

[input]
iceberg = { location = "lake/occ" }

[target]
table = "occ_sample"

[params]
cap = 100
licenses = ["CC0 1.0"]
`+clitest.DuckdbSection)

	s1, err := tb.Append(ctx, lakeRows(1, 5))
	require.NoError(t, err)
	r := runJSON(t, "run", jobFile)
	require.Equal(t, "loaded", r.Decision)
	require.EqualValues(t, 5, r.RowsIn)
	require.Equal(t, "skipped", runJSON(t, "run", jobFile).Decision, "an unchanged lake snapshot skips")

	s2, err := tb.Append(ctx, lakeRows(6, 3))
	require.NoError(t, err)
	plan := clitest.CallIdem(t, "plan", jobFile, "--json")
	require.Equal(t, 0, plan.Code, plan.Stderr)
	require.Contains(t, plan.Stdout, `"changed":["input"]`)
	r = runJSON(t, "run", jobFile)
	require.Equal(t, "loaded", r.Decision)
	require.Equal(t, []string{"input"}, r.Changed)
	require.EqualValues(t, 8, r.RowsIn)

	// A position delete (row 0 of the first file: id 1) and an equality
	// delete (id 7) are applied, never ignored.
	_, err = tb.DeletePositions(ctx, 1, 0)
	require.NoError(t, err)
	s4, err := tb.DeleteEqual(ctx, "SELECT 7::BIGINT AS id", "id")
	require.NoError(t, err)
	r = runJSON(t, "run", jobFile)
	require.EqualValues(t, 6, r.RowsIn)
	require.Equal(t, []int64{2, 3, 4, 5, 6, 8}, clitest.QueryInts(t, db, "SELECT id FROM occ_sample ORDER BY id"))

	pins := clitest.QueryStrs(t, db, "SELECT json_extract_string(inputs, '$.stream_id') FROM idem.snapshots WHERE job = 'sample' ORDER BY snapshot")
	require.Equal(t, []string{fmt.Sprintf("iceberg:%s:%d", tb.UUID, s1), fmt.Sprintf("iceberg:%s:%d", tb.UUID, s2), fmt.Sprintf("iceberg:%s:%d", tb.UUID, s4)}, pins)

	for s := 1; s <= 3 && clitest.LongTests(); s++ { // CI: snapshot 1, below
		rr := clitest.CallIdem(t, "rerun", jobFile, "--snapshot", fmt.Sprint(s), "--json")
		require.Equal(t, 0, rr.Code, rr.Stderr)
		require.Contains(t, rr.Stdout, `"reproduced":true`, "snapshot %d", s)
	}

	before := clitest.CaptureState(t, db)
	require.NoError(t, tb.Expire(s2))
	rr := clitest.CallIdem(t, "rerun", jobFile, "--snapshot", "2")
	require.Equal(t, 3, rr.Code, rr.Stderr)
	require.Contains(t, rr.Stderr, fmt.Sprintf("snapshot 2 of sample read Iceberg snapshot %d", s2))
	require.Equal(t, before, clitest.CaptureState(t, db))
	rr = clitest.CallIdem(t, "rerun", jobFile, "--snapshot", "1", "--json")
	require.Equal(t, 0, rr.Code, rr.Stderr)
	require.Contains(t, rr.Stdout, `"reproduced":true`)

	// An erasure rewrites the snapshots before it; the lake still holds
	// the erased rows, so their rebuild from it is refused, not kept.
	require.Equal(t, 0, clitest.CallIdem(t, "erase", jobFile, "--key", "3").Code)
	rr = clitest.CallIdem(t, "rerun", jobFile, "--snapshot", "3")
	require.Equal(t, 3, rr.Code, rr.Stderr)
	require.Contains(t, rr.Stderr, "snapshot 3 of sample read Iceberg snapshot")
	require.Contains(t, rr.Stderr, "erasure snapshot 4 removed rows from it since")
	require.NoDirExists(t, db+".reruns")
}
