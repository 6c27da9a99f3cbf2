package main

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"strings"

	_ "github.com/duckdb/duckdb-go/v2"
)

// The synthetic change batch. Row r of the batch draws from "source" row s:
// most rows are fresh (s = r); some repeat, contradict or supersede the row
// before them. Source s names a known entity when s is even (stored at
// version 10 by the base load) and a new one when s is odd. Fractions, by
// h = hash(r) % 1000:
//
//	  0- 39  exact repeat of the previous row (new change_id only)    4%
//	 40- 59  same entity and version as the previous row, other value 2% (conflict)
//	 60-159  the previous row's entity at a later version             10%
//	990-999  invalid (empty change_id, blank entity, version 0,       1%
//	         unknown operation, upsert without value)
//	 rest    fresh
//
// Known entities get version 11-15 (3% equal to the stored 10 with the
// stored value: duplicate; 1% equal with another value: conflict; 3% an
// older version: stale). 15% of source rows are deletes.
const batchSQL = `
COPY (
WITH rows AS (
    SELECT r, hash(r) % 1000 AS h,
           CASE WHEN r > 0 AND hash(r) % 1000 < 160 THEN r - 1 ELSE r END AS s
    FROM range({{N}}) t(r)
), src AS (
    SELECT *,
        CASE WHEN s % 2 = 0 THEN s ELSE {{N}} + s END AS k,
        hash(s * 7 + 1) % 100 AS hs,
        CASE WHEN hash(s * 31 + 7) % 100 < 15 THEN 'delete' ELSE 'upsert' END AS sop
    FROM rows
), typed AS (
    SELECT *,
        'ent-' || k AS entity,
        CASE
            WHEN s % 2 = 1 THEN 1 + hash(s) % 5
            WHEN hs < 4 THEN 10
            WHEN hs < 7 THEN 5
            ELSE 11 + hash(s) % 5
        END::BIGINT AS sv
    FROM src
), shaped AS (
    SELECT r, h, entity,
        CASE WHEN h >= 60 AND h < 160 THEN sv + 1 ELSE sv END AS version,
        CASE
            WHEN h >= 40 AND h < 60 THEN 'upsert'
            WHEN h >= 60 AND h < 160 THEN CASE WHEN hash(r * 31 + 7) % 100 < 15 THEN 'delete' ELSE 'upsert' END
            ELSE sop
        END AS op,
        CASE WHEN hs = 3 AND s % 2 = 0 THEN 'w' ELSE 'v' END AS prefix
    FROM typed
)
SELECT
    CASE WHEN h >= 990 AND h % 5 = 0 THEN '' ELSE 'c-' || r END AS change_id,
    CASE WHEN h >= 990 AND h % 5 = 1 THEN '  ' ELSE entity END AS entity_id,
    CASE WHEN h >= 990 AND h % 5 = 2 THEN 0 ELSE version END AS source_version,
    CASE WHEN h >= 990 AND h % 5 = 3 THEN 'merge' WHEN h >= 990 AND h % 5 = 4 THEN 'upsert' ELSE op END AS operation,
    CASE
        WHEN h >= 990 AND h % 5 = 4 THEN NULL
        WHEN h >= 40 AND h < 60 THEN 'x-' || r
        WHEN op = 'delete' THEN NULL
        ELSE prefix || version || '-' || entity
    END AS value
FROM shaped
ORDER BY r
) TO {{OUT}} (FORMAT parquet)`

// baseSQL is the load that gives the database its N stored entities, all
// at version 10 with value 'v10-<entity>'.
const baseSQL = `
COPY (
    SELECT 'b-' || k AS change_id, 'ent-' || k AS entity_id, 10::BIGINT AS source_version,
           'upsert' AS operation, 'v10-ent-' || k AS value
    FROM range({{N}}) t(k)
) TO {{OUT}} (FORMAT parquet)`

// sampleSQL is an occurrence CSV for the sample pipeline: n rows over
// n/2000 species, ~1% repeated ids, ~0.5% invalid, ~5% without a year.
const sampleSQL = `
COPY (
    SELECT
        CASE WHEN hash(r) % 200 = 0 THEN 'x' || r ELSE CAST(CASE WHEN hash(r) % 100 = 1 THEN r - 1 ELSE r END + 1000000 AS VARCHAR) END AS id,
        CAST(100 + hash(r * 3) % greatest({{N}} // 2000, 1) AS VARCHAR) AS species_id,
        CASE WHEN hash(r * 5) % 20 = 0 THEN '' ELSE CAST(1950 + hash(r * 5) % 70 AS VARCHAR) END AS year,
        CASE hash(r * 11) % 4 WHEN 0 THEN 'CC0 1.0' WHEN 1 THEN 'CC BY 4.0' WHEN 2 THEN 'CC BY-NC 4.0' ELSE 'CC BY 4.0' END AS license
    FROM range({{N}}) t(r)
) TO {{OUT}} (FORMAT csv, HEADER true)`

// noopSQL is a wide occurrence CSV for the no-op re-run: about 1 KiB a row
// (a long license text on 9 rows in 10, excluded by the job's licenses), so
// that a 1 GiB file loads once in seconds; only its bytes matter.
const noopSQL = `
COPY (
    SELECT
        CAST(r + 1000000 AS VARCHAR) AS id,
        CAST(100 + r % 500 AS VARCHAR) AS species_id,
        CAST(1950 + r % 70 AS VARCHAR) AS year,
        CASE WHEN r % 10 = 0 THEN 'CC0 1.0' ELSE 'Proprietary licence ' || r || ' ' || repeat('x', 1000) END AS license
    FROM range({{N}}) t(r)
) TO {{OUT}} (FORMAT csv, HEADER true)`

func quote(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// generators are the synthetic files by name.
var generators = map[string]string{
	"base":     baseSQL,
	"batch":    batchSQL,
	"sample":   sampleSQL,
	"sample-b": strings.ReplaceAll(sampleSQL, "hash(r", "hash(7 + r"),
	"noop":     noopSQL,
	// incremental.go
	"incr-base":   incrBaseSQL,
	"incr-one":    incrOneSQL,
	"incr-spread": incrSpreadSQL,
}

// generate writes one synthetic file unless it already exists (inputs are
// deterministic, so a file from an earlier run is reused). DuckDB runs in a
// child process: the bench's own memory stays small, because a child's peak
// RSS as wait4 reports it starts from its parent's at fork.
func (b *bench) generate(ctx context.Context, name string, n int64, path string) error {
	if _, err := os.Stat(path); err == nil {
		return nil
	}
	_, err := runChild(ctx, "", b.self, "child", "gen", "--sql", name, "--n", fmt.Sprint(n), "--out", path)
	return err
}

func generateHere(ctx context.Context, name string, n int64, path string) error {
	text, ok := generators[name]
	if !ok {
		return fmt.Errorf("no generator %q", name)
	}
	db, err := sql.Open("duckdb", "")
	if err != nil {
		return err
	}
	defer db.Close()
	tmp := path + ".tmp"
	if _, err := db.ExecContext(ctx, strings.NewReplacer("{{N}}", fmt.Sprint(n), "{{OUT}}", quote(tmp)).Replace(text)); err != nil {
		return fmt.Errorf("generate %s: %w", path, err)
	}
	return os.Rename(tmp, path)
}
