-- Stage: every input row, typed, with the first check it fails (reason).
-- Quality rules in the job file ([[quality.rules]]) are applied by idem
-- right after this step, to rows whose reason is still NULL.
CREATE OR REPLACE TEMP TABLE staged AS
WITH raw AS (
    SELECT
        row_number() OVER () AS _row,
        CAST(id AS VARCHAR)         AS raw_id,
        CAST(value AS VARCHAR)      AS raw_value,
        CAST(updated_at AS VARCHAR) AS raw_updated_at
    FROM input
)
SELECT
    *,
    TRY_CAST(raw_id AS BIGINT)         AS id,
    raw_value                          AS value,
    TRY_CAST(raw_updated_at AS BIGINT) AS updated_at,
    CASE
        WHEN TRY_CAST(raw_id AS BIGINT) IS NULL THEN 'invalid_id'
        WHEN TRY_CAST(raw_updated_at AS BIGINT) IS NULL THEN 'invalid_updated_at'
    END AS reason
FROM raw;
