-- Rank (v2: only rows with a year): one row per id (a repeated id keeps its smallest full row), then per
-- species the md5 order of the ids. Both orders are total: ties end on the key.
CREATE OR REPLACE TEMP TABLE ranked AS
WITH valid AS (
    SELECT
        _row, id, species_id, year, license,
        row_number() OVER (
            PARTITION BY id
            ORDER BY species_id, year NULLS FIRST, license, _row
        ) AS id_rank
    FROM staged
    WHERE reason IS NULL AND year IS NOT NULL
), licensed AS (
    SELECT * FROM valid
    WHERE id_rank = 1 AND list_contains(getvariable('licenses'), license)
)
SELECT
    _row,
    row_number() OVER (
        PARTITION BY species_id
        ORDER BY md5(CAST(id AS VARCHAR)), id
    ) AS pick
FROM licensed;

CREATE OR REPLACE TEMP TABLE repeated AS
SELECT _row FROM (
    SELECT _row, row_number() OVER (
        PARTITION BY id ORDER BY species_id, year NULLS FIRST, license, _row
    ) AS id_rank
    FROM staged
    WHERE reason IS NULL AND year IS NOT NULL
)
WHERE id_rank > 1;
