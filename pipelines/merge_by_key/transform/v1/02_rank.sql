-- Rank: the distinct variants of each key's valid rows (exact repeats
-- collapse), ranked by ordering value, highest first. dense_rank gives
-- equal values one rank, so no tie is broken by chance. The candidate of a
-- key is its highest ordering value; more than one variant there is an
-- in-batch conflict, whose payload is NULL.
CREATE OR REPLACE TEMP TABLE variants AS
SELECT
    *,
    dense_rank() OVER (PARTITION BY {{key}} ORDER BY _ord DESC) AS order_rank
FROM (
    SELECT DISTINCT {{columns}}, _ord
    FROM staged
    WHERE reason IS NULL
);

CREATE OR REPLACE TEMP TABLE candidates AS
SELECT
    {{key}},
    _ord,
    count(*) > 1 AS batch_conflict,
    {{agg_nonkey}}
FROM variants
WHERE order_rank = 1
GROUP BY {{key}}, _ord;
