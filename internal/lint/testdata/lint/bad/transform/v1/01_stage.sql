-- Stage with a load time: L003 (now()).
CREATE OR REPLACE TEMP TABLE staged AS
SELECT
    row_number() OVER () AS _row,
    TRY_CAST(id AS BIGINT) AS id,
    TRY_CAST(version AS BIGINT) AS version,
    value,
    now() AS loaded_at,
    CAST(NULL AS VARCHAR) AS reason
FROM input;
