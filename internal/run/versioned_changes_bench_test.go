package run_test

import (
	"context"
	"database/sql"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/idem-dev/idem/internal/report"
	"github.com/idem-dev/idem/internal/run"

	_ "github.com/duckdb/duckdb-go/v2"
	"github.com/stretchr/testify/require"
)

var vcGenDir = flag.String("vc.gen", "", "write a large versioned_changes benchmark (job.toml, base.parquet, batch.parquet) into this folder; see scripts/bench-versioned-changes.sh")
var vcGenRows = flag.Int("vc.rows", 1_000_000, "entities in base.parquet and rows in batch.parquet of -vc.gen")

// vcBaseSQL creates one upsert per entity e<i> at version 2 + i%3.
const vcBaseSQL = `SELECT 'c-' || i AS change_id, 'e' || i AS entity_id, CAST(2 + i %% 3 AS BIGINT) AS source_version,
	'upsert' AS operation, 'v' || i AS value
FROM range(%d) t(i) ORDER BY i`

// vcBatchSQL creates a batch of n rows against the base's entities; row i
// does what i % 20 says:
//
//	0, 2-9  a later version (accepted)      1   an exact repeat of row i-1
//	10, 11  a later delete (accepted)       12  version 1 (stale)
//	13      the stored payload (duplicate)  14  the stored version, other value (conflict)
//	15      invalid: blank change id, null entity, version 0, bad operation, upsert without value
//	16      a new entity (accepted)         17  a delete of an unknown entity (tombstone)
//	18      older than row i-8's delete (superseded_in_batch)
//	19      row i-19's version with another value (in-batch conflict)
const vcBatchSQL = `WITH x AS (
	SELECT i, i %% 20 AS b, (i // 20) %% 5 AS k,
	       CASE i %% 20 WHEN 1 THEN i - 1 WHEN 18 THEN i - 8 WHEN 19 THEN i - 19 ELSE i END AS j
	FROM range(%d) t(i)
), y AS (SELECT *, 2 + j %% 3 AS bv FROM x)
SELECT
	CASE WHEN b = 15 AND k = 0 THEN '' ELSE 'd-' || i END AS change_id,
	CASE WHEN b = 15 AND k = 1 THEN NULL WHEN b = 16 THEN 'n' || i WHEN b = 17 THEN 'g' || i ELSE 'e' || j END AS entity_id,
	CAST(CASE
		WHEN b IN (10, 11) THEN bv + 2
		WHEN b = 12 OR b = 16 THEN 1
		WHEN b IN (13, 14) THEN bv
		WHEN b = 15 AND k = 2 THEN 0
		WHEN b = 17 THEN 5
		ELSE bv + 1
	END AS BIGINT) AS source_version,
	CASE WHEN b IN (10, 11, 17) THEN 'delete' WHEN b = 15 AND k = 3 THEN 'merge' ELSE 'upsert' END AS operation,
	CASE
		WHEN b IN (10, 11, 17) OR (b = 15 AND k = 4) THEN NULL
		WHEN b <= 9 THEN 'w' || j
		WHEN b = 12 THEN 'old'
		WHEN b = 13 THEN 'v' || j
		WHEN b = 14 THEN 'other'
		WHEN b = 16 THEN 'n'
		WHEN b = 18 THEN 'sup'
		ELSE 'x' || i
	END AS value
FROM y ORDER BY i`

// TestVersionedChangesGenerateBenchmark writes the inputs of the large
// benchmark. It runs only with -vc.gen=DIR.
func TestVersionedChangesGenerateBenchmark(t *testing.T) {
	if *vcGenDir == "" {
		t.Skip("set -vc.gen=DIR to write the large benchmark's inputs")
	}
	dir, err := filepath.Abs(*vcGenDir)
	require.NoError(t, err)
	require.NoError(t, os.MkdirAll(dir, 0o755))
	vcWriteBenchmark(t, dir, *vcGenRows)
	t.Logf("wrote %s/{job.toml,base.parquet,batch.parquet} with %d rows each", dir, *vcGenRows)
}

// vcWriteBenchmark writes base.parquet and batch.parquet of n rows each,
// generated inside DuckDB, and a job file that applies them, into dir.
func vcWriteBenchmark(t testing.TB, dir string, n int) {
	t.Helper()
	db, err := sql.Open("duckdb", "")
	require.NoError(t, err)
	defer db.Close()
	ctx := context.Background()
	for name, query := range map[string]string{"base.parquet": vcBaseSQL, "batch.parquet": vcBatchSQL} {
		path := filepath.Join(dir, name)
		_, err := db.ExecContext(ctx, fmt.Sprintf("COPY ("+query+") TO %s (FORMAT parquet)", n, vcSQLLiteral(path)))
		require.NoError(t, err, name)
	}
	j := fmt.Sprintf(`name = "bench"
pipeline = "versioned_changes"
transform_version = 1
schema_version = 1
database = %q

[input]
path = %q

[target]
table = "bench_state"
`, filepath.Join(dir, "idem.duckdb"), filepath.Join(dir, "base.parquet"))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "job.toml"), []byte(j), 0o644))
}

// BenchmarkVersionedChangesApply applies a batch of -vc.rows changes (the
// benchmark's mix) against as many stored entities, in process. Not run in
// CI; try -vc.rows=100000 -bench VersionedChangesApply -run '^$'.
func BenchmarkVersionedChangesApply(b *testing.B) {
	for b.Loop() {
		b.StopTimer()
		dir := b.TempDir()
		vcWriteBenchmark(b, dir, *vcGenRows)
		e := newVCEnvAt(b, filepath.Join(dir, "job.toml"))
		e.mustApply(filepath.Join(dir, "base.parquet"), "base")
		var steps []string
		progress := report.Progress{Step: func(name string) func(time.Duration) {
			return func(d time.Duration) { steps = append(steps, fmt.Sprintf("%s %v", name, d.Round(time.Millisecond))) }
		}}
		b.StartTimer()
		res, err := e.db.Run(context.Background(), e.j, run.RunOptions{
			Input: filepath.Join(dir, "batch.parquet"), BatchID: "batch", Progress: progress})
		b.StopTimer()
		require.NoError(b, err)
		b.Logf("%d rows: %s; outcomes %s", res.RowsIn, strings.Join(steps, ", "), vcFormatCounts(res.Outcomes))
		b.StartTimer()
	}
}
