package cli

import (
	"database/sql"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/idem-dev/idem/cmd/idem/cli/internal/clitest"
	"github.com/stretchr/testify/require"
)

// makeParquet writes rows trip_id = 0..n-1 with watermark trip_id / 7 (ties
// of seven), and a NULL watermark on every 1000th row, as Parquet with
// row groups of rowGroup rows.
func makeParquet(t *testing.T, path string, n, rowGroup int) {
	t.Helper()
	db, err := sql.Open("duckdb", "")
	require.NoError(t, err)
	defer db.Close()
	_, err = db.Exec(fmt.Sprintf(`COPY (
		SELECT i AS trip_id, (i %% 50) * 1.5 AS fare,
		       CASE WHEN i %% 1000 = 999 THEN NULL ELSE i // 7 END AS updated_at
		FROM range(%d) t(i)
	) TO '%s' (FORMAT parquet, ROW_GROUP_SIZE %d)`, n, path, rowGroup))
	require.NoError(t, err)
}

func chunkJob(dir string, rows int) string {
	return fmt.Sprintf(`
name = "backfill"
pipeline = "merge_by_key"
transform_version = 1
schema_version = 1
database = %q

[input]
path = %q
chunk_rows = %d
watermark = "updated_at"

[input.columns]
trip_id = "BIGINT"
fare = "DOUBLE"
updated_at = "BIGINT"

[target]
key = ["trip_id"]
`+clitest.DuckdbSection, filepath.Join(dir, "test.duckdb"), filepath.Join(dir, "big.parquet"), rows)
}

// TestChunkedBackfillResumes: a backfill killed between chunks and in the
// middle of one resumes strictly after the last committed watermark and
// ends with every row read exactly once; no watermark value is split
// between two chunks.
func TestChunkedBackfillResumes(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	makeParquet(t, filepath.Join(dir, "big.parquet"), 10000, 2048)
	job := filepath.Join(dir, "job.toml")
	clitest.WriteFile(t, job, chunkJob(dir, 1000))
	db := filepath.Join(dir, "test.duckdb")

	r := clitest.RunCLI(t, dir, "before_chunk:4", "run", job)
	require.True(t, r.Killed, "stdout %s stderr %s", r.Stdout, r.Stderr)
	require.Equal(t, []int64{3}, clitest.QueryInts(t, db, `SELECT count(*) FROM idem.ledger`))

	r = clitest.RunCLI(t, dir, "before_commit", "run", job)
	require.True(t, r.Killed)
	require.Equal(t, []int64{3}, clitest.QueryInts(t, db, `SELECT count(*) FROM idem.ledger`))

	r = clitest.RunCLI(t, dir, "", "run", job)
	require.Equal(t, 0, r.Code, r.Stderr)
	r = clitest.RunCLI(t, dir, "", "run", job, "--json")
	require.Equal(t, 0, r.Code, r.Stderr)
	require.Contains(t, r.Stdout, `"decision":"skipped"`)

	// Every row exactly once.
	require.Equal(t, []int64{10000, 10000, 10000}, clitest.QueryInts(t, db, `
		SELECT count(*) FROM backfill_outcomes
		UNION ALL SELECT count(DISTINCT trip_id) FROM backfill_outcomes
		UNION ALL SELECT count(*) FROM backfill`+" ORDER BY 1"))
	// Chunks follow each other: each starts where the previous ended, the
	// bounds strictly increase, and every row of a chunk lies in its range.
	bounds := clitest.QueryStrs(t, db, `SELECT coalesce(CAST(from_pos AS VARCHAR), 'start') || '..' || to_pos FROM idem.ledger ORDER BY snapshot`)
	require.Equal(t, "start..142", bounds[0]) // the 1000th smallest watermark is 142 (row 1000)
	require.Equal(t, []int64{0}, clitest.QueryInts(t, db, `
		SELECT count(*) FROM idem.ledger l, idem.ledger n
		WHERE n.snapshot = l.snapshot + 1 AND (n.from_pos <> l.to_pos OR n.to_pos <= l.to_pos)`))
	require.Equal(t, []int64{0}, clitest.QueryInts(t, db, `
		SELECT count(*) FROM backfill_outcomes o JOIN idem.ledger l ON l.batch_id = o.batch_id
		WHERE CAST(o.updated_at AS BIGINT) > l.to_pos OR CAST(o.updated_at AS BIGINT) <= l.from_pos
		   OR (o.updated_at IS NULL AND l.from_pos IS NOT NULL)`))
	// Rows without a watermark came with the first chunk.
	require.Equal(t, []int64{10}, clitest.QueryInts(t, db, `SELECT count(*) FROM backfill_outcomes WHERE updated_at IS NULL AND batch_id = 'big.parquet@start'`))

	// A second input continues strictly after the watermark (1428): its rows
	// at or below it count as read; its rows without a watermark come with
	// its first chunk.
	more := filepath.Join(dir, "more.parquet")
	sqlDB, err := sql.Open("duckdb", "")
	require.NoError(t, err)
	_, err = sqlDB.Exec(`COPY (SELECT i AS trip_id, 1.0 AS fare, CASE WHEN i % 100 = 0 THEN NULL ELSE i // 7 END AS updated_at
		FROM range(9000, 11000) t(i)) TO '` + more + `' (FORMAT parquet)`)
	require.NoError(t, err)
	require.NoError(t, sqlDB.Close())
	want := 0
	for i := 9000; i < 11000; i++ {
		if i%100 == 0 || i/7 > 1428 {
			want++
		}
	}
	r = clitest.RunCLI(t, dir, "", "run", job, "--input", more, "--json")
	require.Equal(t, 0, r.Code, r.Stderr)
	require.Equal(t, []int64{int64(want)}, clitest.QueryInts(t, db, `SELECT count(*) FROM backfill_outcomes WHERE batch_id LIKE 'more.parquet@%'`))
	require.Equal(t, []int64{20}, clitest.QueryInts(t, db, `SELECT count(*) FROM backfill_outcomes WHERE updated_at IS NULL AND batch_id = 'more.parquet@1428'`))
	r = clitest.RunCLI(t, dir, "", "run", job, "--input", more, "--json")
	require.Contains(t, r.Stdout, `"decision":"skipped"`)
}

// TestTripsBackfillExample: the example chunked job runs from the
// repository root, every row exactly once, and a second run finds nothing
// past the watermark.
func TestTripsBackfillExample(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "bf.duckdb")
	root := filepath.Join("..", "..", "..")
	r := clitest.RunCLI(t, root, "", "run", "configs/trips_backfill.toml", "--db", db)
	require.Equal(t, 0, r.Code, r.Stderr)
	require.Contains(t, r.Stdout, "trips_backfill: applied 3 chunk(s), watermark 4")
	require.Equal(t, []int64{14}, clitest.QueryInts(t, db, `SELECT count(*) FROM trips_outcomes`))
	require.Equal(t, []string{"start..1", "1..3", "3..4"}, clitest.QueryStrs(t, db, `SELECT coalesce(CAST(from_pos AS VARCHAR), 'start') || '..' || to_pos FROM idem.ledger ORDER BY snapshot`))
	r = clitest.RunCLI(t, root, "", "run", "configs/trips_backfill.toml", "--db", db)
	require.Equal(t, 0, r.Code, r.Stderr)
	require.Contains(t, r.Stdout, "skipped: nothing new")
}
