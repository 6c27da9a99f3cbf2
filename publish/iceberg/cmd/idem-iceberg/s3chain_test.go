package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/iceberg-go"
	sqlcat "github.com/apache/iceberg-go/catalog/sql"
	icebergio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"
	"github.com/stretchr/testify/require"
	"github.com/uptrace/bun/driver/sqliteshim"

	"github.com/idem-dev/idem/publish/iceberg/internal/s3server"
	"github.com/idem-dev/idem/publish/iceberg/publisher"
)

// srcTable is an Iceberg table of orders that iceberg-go writes to an
// s3:// warehouse through a SQL catalog, as another engine would.
type srcTable struct {
	t   *testing.T
	tbl *table.Table
	db  *sql.DB
}

var ordersArrow = arrow.NewSchema([]arrow.Field{
	{Name: "order_id", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
	{Name: "amount", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
	{Name: "updated_at", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
}, nil)

// newSrcTable creates table src.orders in the SQL catalog dsn (a
// postgres:// URL, else the SQLite file p.dir/src.db) with its files under
// warehouse.
func newSrcTable(t *testing.T, p *project, dsn, warehouse string) *srcTable {
	ctx := context.Background()
	driver, src, dialect := sqliteshim.ShimName, "file:"+(&url.URL{Path: filepath.Join(p.dir, "src.db")}).EscapedPath(), sqlcat.SQLite
	if strings.HasPrefix(dsn, "postgres://") {
		driver, src, dialect = "pgx", dsn, sqlcat.Postgres
	}
	db, err := sql.Open(driver, src)
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	srv := s3srv.Get(t)
	cat, err := sqlcat.NewCatalog("src", db, dialect, iceberg.Properties{"warehouse": warehouse,
		icebergio.S3EndpointURL: srv.Endpoint, icebergio.S3Region: s3server.Region,
		icebergio.S3AccessKeyID: s3server.AccessKey, icebergio.S3SecretAccessKey: s3server.SecretKey})
	require.NoError(t, err)
	require.NoError(t, cat.CreateNamespace(ctx, table.Identifier{"src"}, nil))
	schema := iceberg.NewSchema(0,
		iceberg.NestedField{ID: 1, Name: "order_id", Type: iceberg.PrimitiveTypes.Int64},
		iceberg.NestedField{ID: 2, Name: "amount", Type: iceberg.PrimitiveTypes.Int64},
		iceberg.NestedField{ID: 3, Name: "updated_at", Type: iceberg.PrimitiveTypes.Int64})
	tbl, err := cat.CreateTable(ctx, table.Identifier{"src", "orders"}, schema)
	require.NoError(t, err)
	return &srcTable{t: t, tbl: tbl, db: db}
}

// append appends orders ids at version v and returns the new snapshot.
func (s *srcTable) append(ids []int64, v int64) int64 {
	s.t.Helper()
	b := array.NewRecordBuilder(memory.DefaultAllocator, ordersArrow)
	defer b.Release()
	for _, id := range ids {
		b.Field(0).(*array.Int64Builder).Append(id)
		b.Field(1).(*array.Int64Builder).Append(id*100 + v)
		b.Field(2).(*array.Int64Builder).Append(v)
	}
	rec := b.NewRecordBatch()
	defer rec.Release()
	at := array.NewTableFromRecords(ordersArrow, []arrow.RecordBatch{rec})
	defer at.Release()
	tbl, err := s.tbl.AppendTable(context.Background(), at, 1024, nil)
	require.NoError(s.t, err)
	s.tbl = tbl
	return tbl.CurrentSnapshot().SnapshotID
}

// expireOldest expires every snapshot but the last keep.
func (s *srcTable) expireOldest(keep int) {
	s.t.Helper()
	tx := s.tbl.NewTransaction()
	require.NoError(s.t, tx.ExpireSnapshots(table.WithRetainLast(keep), table.WithOlderThan(0), table.WithPostCommit(false)))
	tbl, err := tx.Commit(context.Background())
	require.NoError(s.t, err)
	s.tbl = tbl
}

// runResult is the part of `run --json` the tests read.
type runResult struct {
	Decision string `json:"decision"`
	RowsIn   int64  `json:"rows_in"`
	BatchID  string `json:"batch_id"`
}

func (p *project) runJSON(jobFile string) runResult {
	p.t.Helper()
	out := p.ok(idemIceberg, "run", jobFile, "--json")
	var r runResult
	// A publishing job's run prints its JSON object, then the publisher's line.
	require.NoError(p.t, json.NewDecoder(strings.NewReader(out)).Decode(&r), out)
	return r
}

// queryStrs reads one column of the project's database (read only).
func (p *project) queryStrs(q string) []string {
	p.t.Helper()
	db, err := sql.Open("duckdb", filepath.Join(p.dir, "idem.duckdb")+"?access_mode=read_only")
	require.NoError(p.t, err)
	defer db.Close()
	rows, err := db.Query(q)
	require.NoError(p.t, err)
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		require.NoError(p.t, rows.Scan(&s))
		out = append(out, s)
	}
	require.NoError(p.t, rows.Err())
	return out
}

// TestS3Chain: a chain against a real S3-compatible server. Its first job
// applies the rows appended to an Iceberg table that iceberg-go writes to
// the object store through a PostgreSQL catalog (read by idem's own S3
// client), a model over it
// publishes to a second Iceberg table in an s3:// warehouse. Each run
// applies exactly the rows appended since the last (after a run killed
// once it read the objects, and one killed at a random moment, too), every idem snapshot pins its lake snapshot,
// rerun reproduces each (refused once its lake snapshot expired), and an
// erasure in idem rewrites the published table's snapshots, saying which,
// and deletes every object that held the subject.
func TestS3Chain(t *testing.T) {
	t.Parallel()
	p := newProject(t, "")
	prefix := p.useS3()
	// The input's catalog is PostgreSQL (idem reads it with pgx).
	srcCatalog := startPostgres(t)
	src := newSrcTable(t, p, srcCatalog, prefix+"/src")
	orders := `name = "orders"
pipeline = "merge_by_key"
transform_version = 1
schema_version = 1
database = "idem.duckdb"
[input]
iceberg = { catalog = "` + srcCatalog + `", table = "src.orders", read = "appends" }
[input.columns]
order_id = "BIGINT"
amount = "BIGINT"
updated_at = "BIGINT"
[target]
key = ["order_id"]
order_by = "updated_at"
[duckdb]
threads = 1
`
	p.write("orders.toml", orders)
	p.write("models/subjects/v1.sql", `SELECT order_id, printf('subject-%d', order_id) AS subject, amount
FROM {{upstream:orders}} WHERE idem_status = 'active'
`)
	p.write("subjects.toml", fmt.Sprintf(`name = "subjects"
pipeline = "select"
transform_version = 1
database = "idem.duckdb"
[input]
upstream = ["orders"]
[transform]
sql = "models/subjects"
[target]
key = ["order_id"]
[duckdb]
threads = 1
[publish.iceberg]
catalog = %q
warehouse = %q
namespace = "analytics"
`, p.catalog, prefix+"/wh"))

	var lakeSnaps []int64
	for i, ids := range [][]int64{{1, 2, 3}, {4, 5}, {2, 6}} {
		lakeSnaps = append(lakeSnaps, src.append(ids, int64(i+1)))
		if i == 1 {
			// Killed once the stage step read the objects: the next run
			// applies the append, once.
			p.env = append(p.env, "IDEM_FAULT=after_step:01_stage.sql")
			r := p.run(idemIceberg, "run", "orders.toml")
			p.env = p.env[:len(p.env)-1]
			require.Equal(t, -1, r.code, "killed once it read the lake's objects: %s", r.stderr)
		}
		killed := 0
		if i == 2 {
			// SIGKILLed at a random moment (while it lists, downloads or
			// applies): the next run applies the append unless the killed
			// one committed it, and removes the killed one's copies.
			cmd := exec.Command(idemIceberg, "run", "orders.toml")
			cmd.Dir, cmd.Env = p.dir, append(os.Environ(), p.env...)
			require.NoError(t, cmd.Start())
			time.Sleep(time.Duration(rand.IntN(1500)) * time.Millisecond)
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			killed = cmd.Process.Pid
		}
		r := p.runJSON("orders.toml")
		if killed == 0 || r.Decision != "already_committed" {
			require.Equal(t, "applied", r.Decision, "append %d", i+1)
			require.EqualValues(t, len(ids), r.RowsIn, "append %d: exactly the rows appended", i+1)
		}
		if killed != 0 {
			copies, _ := os.ReadDir(filepath.Join(os.TempDir(), "idem-lake"))
			for _, c := range copies {
				require.False(t, strings.HasPrefix(c.Name(), fmt.Sprint(killed)+"-"), "the killed reader's copies of the lake's objects outlive it")
			}
		}
		require.Equal(t, fmt.Sprintf("iceberg-%d", lakeSnaps[i]), r.BatchID)
		require.Contains(t, p.ok(idemIceberg, "run", "subjects.toml"), "iceberg   analytics.subjects: published snapshot")
	}
	uuid := src.tbl.Metadata().TableUUID().String()
	var want []string
	for _, s := range lakeSnaps {
		want = append(want, fmt.Sprintf("iceberg:%s:%d", uuid, s))
	}
	require.Equal(t, want, p.queryStrs("SELECT json_extract_string(inputs, '$.stream_id') FROM idem.idem.snapshots WHERE job = 'orders' ORDER BY snapshot"),
		"every idem snapshot pins the lake snapshot it read")
	// Rerun reproduces from the lake snapshots pinned: in CI two, with
	// IDEM_LONG=1 every snapshot of both jobs.
	reruns := [][2]string{{"orders.toml", "2"}, {"subjects.toml", "3"}}
	for s := 1; s <= 3 && os.Getenv("IDEM_LONG") == "1"; s++ {
		reruns = append(reruns, [2]string{"orders.toml", fmt.Sprint(s)}, [2]string{"subjects.toml", fmt.Sprint(s)})
	}
	for _, rr := range reruns {
		require.Contains(t, p.ok(idemIceberg, "rerun", rr[0], "--snapshot", rr[1], "--json"), `"reproduced":true`, "%s snapshot %s", rr[0], rr[1])
	}

	// The oldest lake snapshot expires: rerun of the idem snapshot that
	// read it is refused; a fourth append is applied alone.
	src.expireOldest(2)
	r := p.run(idemIceberg, "rerun", "orders.toml", "--snapshot", "1")
	require.Equal(t, 3, r.code, r.stderr)
	require.Contains(t, r.stderr, fmt.Sprintf("snapshot 1 of orders read Iceberg snapshot %d of table %s, which the table no longer holds", lakeSnaps[0], uuid))
	s4 := src.append([]int64{7, 8, 9, 10}, 4)
	run := p.runJSON("orders.toml")
	require.Equal(t, runResult{"applied", 4, fmt.Sprintf("iceberg-%d", s4)}, run)
	p.ok(idemIceberg, "run", "subjects.toml")
	var before publisher.VerifyReport
	require.NoError(t, json.Unmarshal([]byte(p.ok(idemIceberg, "publish", "subjects.toml", "--verify", "--json")), &before))
	require.Len(t, before.Verified, 4, "every idem snapshot of the model reads back equal from the s3:// warehouse")
	require.Equal(t, []string{"11"}, p.queryStrs("SELECT sum(rows_in)::VARCHAR FROM idem.idem.ledger WHERE job = 'orders'"), "every appended row applied once")
	// The table found by its location: the newest metadata file listed
	// in its metadata folder on the server, read whole.
	whole := strings.Replace(orders, `name = "orders"`, `name = "whole"`, 1)
	p.write("whole.toml", strings.Replace(whole, `{ catalog = "`+srcCatalog+`", table = "src.orders", read = "appends" }`, fmt.Sprintf("{ location = %q }", src.tbl.Location()), 1))
	require.EqualValues(t, 11, p.runJSON("whole.toml").RowsIn, "every row of the current lake snapshot")

	// An erasure in idem reaches the published table's objects.
	wh := prefix + "/wh"
	p.mirror(wh)
	require.NotEmpty(t, p.lakeHolds("subject-2"), "the subject is published before its erasure")
	// idem-iceberg erase erases from orders and from the model over it,
	// and publishes the model's table again without the subject, saying
	// which Iceberg snapshots it rewrote.
	out := p.ok(idemIceberg, "erase", "orders.toml", "--key", "2")
	require.Contains(t, out, "analytics.subjects: published snapshot 1, 2, 3, 4, 5")
	require.Contains(t, out, "again without the erased rows, expired 4 Iceberg snapshot(s)")
	for _, v := range before.Verified {
		require.Contains(t, out, fmt.Sprintf("%d (snapshot %d, now ", v.IcebergSnapshot, v.Snapshot), "the erasure names the Iceberg snapshot it rewrote")
	}
	require.Empty(t, p.publish("subjects.toml").Published, "the erasure was published by the erase")
	require.Equal(t, []int64{1, 2, 3, 4, 5}, p.verify("subjects.toml"))
	p.mirror(wh)
	require.Empty(t, p.lakeHolds("subject-2"), "an object holding the erased subject outlives the erasure")
	require.NotEmpty(t, p.lakeHolds("subject-3"))
}
