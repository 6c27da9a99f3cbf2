// Package inputtest cross-checks idem's native Iceberg reader (the core's
// internal/lake and [input] iceberg) on tables written by iceberg-go
// through a SQL catalog (read through the same catalog), as other engines
// write them: appends, a
// merge-on-read delete (position delete files) and an expiry.
package inputtest

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/iceberg-go"
	icecat "github.com/apache/iceberg-go/catalog"
	sqlcat "github.com/apache/iceberg-go/catalog/sql"
	"github.com/apache/iceberg-go/table"
	_ "github.com/duckdb/duckdb-go/v2"
	"github.com/stretchr/testify/require"
	"github.com/uptrace/bun/driver/sqliteshim"

	"github.com/idem-dev/idem/cmd/idem/cli"
	"github.com/idem-dev/idem/internal/lake"
)

var arrowSchema = arrow.NewSchema([]arrow.Field{
	{Name: "order_id", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
	{Name: "amount", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
	{Name: "updated_at", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
}, nil)

// orders is an Arrow table of orders ids first.. at version v.
func orders(ids []int64, v int64) arrow.Table {
	b := array.NewRecordBuilder(memory.DefaultAllocator, arrowSchema)
	defer b.Release()
	for _, id := range ids {
		b.Field(0).(*array.Int64Builder).Append(id)
		b.Field(1).(*array.Float64Builder).Append(float64(id)*1.5 + float64(v))
		b.Field(2).(*array.Int64Builder).Append(v)
	}
	rec := b.NewRecordBatch()
	defer rec.Release()
	return array.NewTableFromRecords(arrowSchema, []arrow.RecordBatch{rec})
}

// icebergGoRows reads snapshot id of tbl through iceberg-go's own scan as
// "order_id:amount:updated_at" in order.
func icebergGoRows(t *testing.T, ctx context.Context, tbl *table.Table, id int64) []string {
	at, err := tbl.Scan(table.WithSnapshotID(id)).ToArrowTable(ctx)
	require.NoError(t, err)
	defer at.Release()
	var out []string
	tr := array.NewTableReader(at, 1024)
	defer tr.Release()
	for tr.Next() {
		rec := tr.RecordBatch()
		for i := 0; i < int(rec.NumRows()); i++ {
			out = append(out, fmt.Sprintf("%d:%g:%d", rec.Column(0).(*array.Int64).Value(i), rec.Column(1).(*array.Float64).Value(i), rec.Column(2).(*array.Int64).Value(i)))
		}
	}
	slices.Sort(out)
	return out
}

// lakeRows reads snapshot id of the table whose metadata is at loc with
// idem's reader and DuckDB, in the same form.
func lakeRows(t *testing.T, ctx context.Context, db *sql.DB, loc string, id int64) []string {
	st := lake.LocalStore{}
	m, err := lake.ReadMetadata(ctx, st, loc)
	require.NoError(t, err)
	s := m.Snapshot(id)
	require.NotNil(t, s)
	sc, err := lake.Plan(ctx, st, m, s)
	require.NoError(t, err)
	q, err := sc.Query(ctx, st, []string{"order_id", "amount", "updated_at"})
	require.NoError(t, err)
	rows, err := db.QueryContext(ctx, "SELECT order_id, amount, updated_at FROM ("+q+")")
	require.NoError(t, err)
	defer rows.Close()
	var out []string
	for rows.Next() {
		var o, u int64
		var a float64
		require.NoError(t, rows.Scan(&o, &a, &u))
		out = append(out, fmt.Sprintf("%d:%g:%d", o, a, u))
	}
	require.NoError(t, rows.Err())
	slices.Sort(out)
	return out
}

func idem(t *testing.T, args ...string) (int, string, string) {
	var stdout, stderr bytes.Buffer
	code := cli.Main(context.Background(), args, &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

// TestIcebergGoTable: a table iceberg-go writes (three appends, a
// merge-on-read delete, an expiry) reads, snapshot by snapshot, the rows
// iceberg-go's own scan reads; a job applying its appends through the idem
// CLI applies exactly the appended rows, pins each lake snapshot, is
// refused at the delete, and rerun of an idem snapshot whose lake
// snapshot expired is refused with exit 3.
func TestIcebergGoTable(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	catDB, err := sql.Open(sqliteshim.ShimName, "file:"+(&url.URL{Path: filepath.Join(dir, "catalog.db")}).EscapedPath())
	require.NoError(t, err)
	defer catDB.Close()
	warehouse := (&url.URL{Scheme: "file", Path: filepath.ToSlash(filepath.Join(dir, "warehouse"))}).String()
	cat, err := sqlcat.NewCatalog("idem", catDB, sqlcat.SQLite, iceberg.Properties{"warehouse": warehouse})
	require.NoError(t, err)
	require.NoError(t, cat.CreateNamespace(ctx, table.Identifier{"ns"}, nil))
	schema := iceberg.NewSchema(0,
		iceberg.NestedField{ID: 1, Name: "order_id", Type: iceberg.PrimitiveTypes.Int64},
		iceberg.NestedField{ID: 2, Name: "amount", Type: iceberg.PrimitiveTypes.Float64},
		iceberg.NestedField{ID: 3, Name: "updated_at", Type: iceberg.PrimitiveTypes.Int64})
	tbl, err := cat.CreateTable(ctx, table.Identifier{"ns", "orders"}, schema, icecat.WithProperties(iceberg.Properties{
		table.WriteDeleteModeKey: table.WriteModeMergeOnRead, table.PropertyFormatVersion: "2"}))
	require.NoError(t, err)

	jobFile := filepath.Join(dir, "orders.toml")
	require.NoError(t, writeFile(jobFile, (`name = "orders"
pipeline = "merge_by_key"
transform_version = 1
schema_version = 1
database = "idem.duckdb"

[input]
iceberg = { catalog = "catalog.db", table = "ns.orders", read = "appends" }

[input.columns]
order_id = "BIGINT"
amount = "DOUBLE"
updated_at = "BIGINT"

[target]
key = ["order_id"]
order_by = "updated_at"

[duckdb]
threads = 1
`)))

	db, err := sql.Open("duckdb", "")
	require.NoError(t, err)
	defer db.Close()
	var lakeSnaps []int64
	for i, batch := range [][]int64{{1, 2, 3}, {4, 5}, {2, 6}} {
		at := orders(batch, int64(i+1))
		tbl, err = tbl.AppendTable(ctx, at, 1024, nil)
		at.Release()
		require.NoError(t, err)
		lakeSnaps = append(lakeSnaps, tbl.CurrentSnapshot().SnapshotID)
		code, out, errOut := idem(t, "run", jobFile, "--json")
		require.Equal(t, 0, code, errOut)
		var res struct {
			Decision string `json:"decision"`
			RowsIn   int64  `json:"rows_in"`
			BatchID  string `json:"batch_id"`
		}
		require.NoError(t, json.Unmarshal([]byte(out), &res))
		require.Equal(t, "applied", res.Decision)
		require.EqualValues(t, len(batch), res.RowsIn, "append %d: exactly the appended rows", i+1)
		require.Equal(t, fmt.Sprintf("iceberg-%d", lakeSnaps[i]), res.BatchID)
	}

	// A merge-on-read delete writes a position delete file.
	tx := tbl.NewTransaction()
	require.NoError(t, tx.Delete(ctx, iceberg.EqualTo(iceberg.Reference("order_id"), int64(4)), nil))
	tbl, err = tx.Commit(ctx)
	require.NoError(t, err)
	del := tbl.CurrentSnapshot().SnapshotID
	for _, id := range append(slices.Clone(lakeSnaps), del) {
		require.Equal(t, icebergGoRows(t, ctx, tbl, id), lakeRows(t, ctx, db, tbl.MetadataLocation(), id), "lake snapshot %d", id)
	}
	m, err := lake.ReadMetadata(ctx, lake.LocalStore{}, tbl.MetadataLocation())
	require.NoError(t, err)
	sc, err := lake.Plan(ctx, lake.LocalStore{}, m, m.Snapshot(del))
	require.NoError(t, err)
	require.Len(t, sc.PosDeletes, 1, "iceberg-go wrote the delete as a position delete file")
	require.NotContains(t, strings.Join(lakeRows(t, ctx, db, tbl.MetadataLocation(), del), " "), "4:8:2", "the position delete is applied")
	require.Contains(t, strings.Join(lakeRows(t, ctx, db, tbl.MetadataLocation(), lakeSnaps[2]), " "), "4:8:2")
	code, _, errOut := idem(t, "run", jobFile)
	require.Equal(t, 3, code, errOut)
	require.Contains(t, errOut, "not an append")

	// Expire all but the last two lake snapshots: idem snapshot 1 pinned
	// the first.
	tx = tbl.NewTransaction()
	require.NoError(t, tx.ExpireSnapshots(table.WithRetainLast(2), table.WithOlderThan(0), table.WithPostCommit(false)))
	tbl, err = tx.Commit(ctx)
	require.NoError(t, err)
	code, _, errOut = idem(t, "rerun", jobFile, "--snapshot", "1")
	require.Equal(t, 3, code, errOut)
	require.Contains(t, errOut, fmt.Sprintf("snapshot 1 of orders read Iceberg snapshot %d", lakeSnaps[0]))
}
