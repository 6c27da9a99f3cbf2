-- Rank: per id, the distinct variants at the highest updated_at. dense_rank
-- gives equal values one rank, so no tie is broken by chance; more than one
-- variant at the top is an in-batch conflict.
CREATE OR REPLACE TEMP TABLE variants AS
SELECT
    *,
    dense_rank() OVER (PARTITION BY id ORDER BY updated_at DESC) AS order_rank
FROM (
    SELECT DISTINCT id, value, updated_at
    FROM staged
    WHERE reason IS NULL
);

CREATE OR REPLACE TEMP TABLE candidates AS
SELECT
    id,
    updated_at,
    count(*) > 1 AS batch_conflict,
    CASE WHEN count(*) = 1 THEN any_value(value) END AS value
FROM variants
WHERE order_rank = 1
GROUP BY id, updated_at;
