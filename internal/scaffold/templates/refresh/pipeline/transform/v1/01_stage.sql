-- Stage: every input row, typed, with the first check it fails (reason).
CREATE OR REPLACE TEMP TABLE staged AS
WITH raw AS (
    SELECT
        row_number() OVER () AS _row,
        CAST(id AS VARCHAR)    AS raw_id,
        CAST(name AS VARCHAR)  AS raw_name,
        CAST(score AS VARCHAR) AS raw_score
    FROM input
)
SELECT
    *,
    TRY_CAST(raw_id AS BIGINT)     AS id,
    nullif(trim(raw_name), '')     AS name,
    TRY_CAST(raw_score AS INTEGER) AS score,
    CASE
        WHEN TRY_CAST(raw_id AS BIGINT) IS NULL THEN 'invalid_id'
        WHEN nullif(trim(raw_name), '') IS NULL THEN 'invalid_name'
        WHEN TRY_CAST(raw_score AS INTEGER) IS NULL THEN 'invalid_score'
    END AS reason
FROM raw;
