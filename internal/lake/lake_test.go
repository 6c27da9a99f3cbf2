package lake_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"strings"
	"testing"

	_ "github.com/duckdb/duckdb-go/v2"
	"github.com/stretchr/testify/require"

	"github.com/idem-dev/idem/internal/lake"
	"github.com/idem-dev/idem/internal/lake/laketest"
)

var cols = []laketest.Column{{ID: 1, Name: "id", Type: "long"}, {ID: 2, Name: "cat", Type: "string"}, {ID: 3, Name: "v", Type: "double"}}

// rowsAt reads the table in dir at snapshot id (0: current) as "id:cat:v"
// lines in id order.
func rowsAt(t *testing.T, db *sql.DB, dir string, id int64, columns ...string) string {
	t.Helper()
	ctx := context.Background()
	st := lake.LocalStore{}
	loc, err := lake.LatestMetadata(ctx, st, dir)
	require.NoError(t, err)
	m, err := lake.ReadMetadata(ctx, st, loc)
	require.NoError(t, err)
	s := m.Current()
	if id != 0 {
		s = m.Snapshot(id)
		require.NotNil(t, s, "snapshot %d", id)
	}
	sc, err := lake.Plan(ctx, st, m, s)
	require.NoError(t, err)
	if len(columns) == 0 {
		columns = []string{"id", "cat", "v"}
	}
	q, err := sc.Query(ctx, st, columns)
	require.NoError(t, err)
	var out []string
	rows, err := db.QueryContext(ctx, "SELECT concat_ws(':', *COLUMNS(*)) FROM ("+q+") ORDER BY ALL")
	require.NoError(t, err, q)
	defer rows.Close()
	for rows.Next() {
		var s sql.NullString
		require.NoError(t, rows.Scan(&s))
		out = append(out, s.String)
	}
	require.NoError(t, rows.Err())
	return strings.Join(out, " ")
}

// newTable starts a test table in a fresh folder, with its own DuckDB.
func newTable(t *testing.T, uuid string) (*sql.DB, string, *laketest.Table) {
	db, err := sql.Open("duckdb", "")
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	dir := filepath.Join(t.TempDir(), "t")
	tb, err := laketest.New(db, dir, uuid, cols)
	require.NoError(t, err)
	return db, dir, tb
}

func TestReadSnapshotsAndDeletes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, dir, tb := newTable(t, "9c0e7d3a-0000-4000-8000-000000000001")
	require.Equal(t, "", rowsAt(t, db, dir, 0))

	s1, err := tb.Append(ctx, "SELECT i::BIGINT AS id, 'a' AS cat, i * 1.5 AS v FROM range(1, 4) r(i)")
	require.NoError(t, err)
	s2, err := tb.Append(ctx, "SELECT i::BIGINT AS id, 'b' AS cat, i * 1.5 AS v FROM range(4, 6) r(i)")
	require.NoError(t, err)
	// Row 1 (id 2) of the first file, then every row with id 4 and with
	// id 1 (equality deletes apply to older data only).
	s3, err := tb.DeletePositions(ctx, 1, 1)
	require.NoError(t, err)
	s4, err := tb.DeleteEqual(ctx, "SELECT 4::BIGINT AS id UNION ALL SELECT 1", "id")
	require.NoError(t, err)
	s5, err := tb.Append(ctx, "SELECT 1::BIGINT AS id, 'c' AS cat, 9.0 AS v")
	require.NoError(t, err)

	require.Equal(t, "1:a:1.5 2:a:3.0 3:a:4.5", rowsAt(t, db, dir, s1))
	require.Equal(t, "1:a:1.5 2:a:3.0 3:a:4.5 4:b:6.0 5:b:7.5", rowsAt(t, db, dir, s2))
	require.Equal(t, "1:a:1.5 3:a:4.5 4:b:6.0 5:b:7.5", rowsAt(t, db, dir, s3))
	require.Equal(t, "3:a:4.5 5:b:7.5", rowsAt(t, db, dir, s4))
	require.Equal(t, "1:c:9.0 3:a:4.5 5:b:7.5", rowsAt(t, db, dir, s5))
	require.Equal(t, "1:c 3:a 5:b", rowsAt(t, db, dir, 0, "id", "cat"))

	// Expiry takes a snapshot out of the metadata.
	require.NoError(t, tb.Expire(s2))
	m, err := lake.ReadMetadata(ctx, lake.LocalStore{}, tb.MetadataFile())
	require.NoError(t, err)
	require.Nil(t, m.Snapshot(s2))
	require.NotNil(t, m.Snapshot(s3))

	// Schema evolution: v renamed w, a column added; old files read by
	// field id, the new column NULL in them.
	require.NoError(t, tb.Evolve([]laketest.Column{cols[0], cols[1], {ID: 3, Name: "w", Type: "double"}, {ID: 4, Name: "n", Type: "long"}}))
	_, err = tb.Append(ctx, "SELECT 7::BIGINT AS id, 'd' AS cat, 1.0 AS w, 70::BIGINT AS n")
	require.NoError(t, err)
	require.Equal(t, "1:c:9.0 3:a:4.5 5:b:7.5 7:d:1.0:70", rowsAt(t, db, dir, 0, "id", "cat", "w", "n"))
}

func TestPartitionedEqualityDeletes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, dir, tb := newTable(t, "9c0e7d3a-0000-4000-8000-000000000002")
	tb.PartitionBy = "cat"
	_, err := tb.Append(ctx, "SELECT i::BIGINT AS id, CASE WHEN i % 2 = 0 THEN 'even' ELSE 'odd' END AS cat, 0.5 AS v FROM range(1, 5) r(i)")
	require.NoError(t, err)
	// An equality delete on v written in partition "odd" deletes there only.
	_, err = tb.DeleteEqual(ctx, "SELECT 'odd' AS cat, 0.5 AS v", "v")
	require.NoError(t, err)
	require.Equal(t, "2:even:0.5 4:even:0.5", rowsAt(t, db, dir, 0))
}

// TestRefusals: what idem cannot read right is refused by name, never
// read as NULLs or skipped: a data file without field ids, a nested
// column, a column the snapshot's schema does not hold.
func TestRefusals(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, dir, tb := newTable(t, "9c0e7d3a-0000-4000-8000-000000000003")
	tb.PlainFiles = true
	_, err := tb.Append(ctx, "SELECT 1::BIGINT AS id, 'a' AS cat, 0.5 AS v")
	require.NoError(t, err)
	st := lake.LocalStore{}
	loc, err := lake.LatestMetadata(ctx, st, dir)
	require.NoError(t, err)
	m, err := lake.ReadMetadata(ctx, st, loc)
	require.NoError(t, err)
	sc, err := lake.Plan(ctx, st, m, m.Current())
	require.NoError(t, err)
	err = sc.CheckFieldIDs(ctx, db, st)
	require.ErrorContains(t, err, "data/00001.parquet has no Iceberg field ids")
	_, err = sc.Query(ctx, st, []string{"id", "nope"})
	require.ErrorContains(t, err, `has no column "nope"`)

	nested := lake.Field{ID: 9, Name: "tags", Type: []byte(`{"type":"list","element-id":10,"element":"string","element-required":false}`)}
	_, err = nested.DuckDBType()
	require.ErrorContains(t, err, `column "tags" is an Iceberg list: idem reads primitive columns only`)
}
