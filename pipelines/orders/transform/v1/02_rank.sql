-- Rank: per order, the valid rows at its highest position in this batch are
-- the candidate; lower positions are superseded in the batch. Distinct
-- payloads at that one position are an in-batch conflict (the source gives
-- one event per position), exact repeats collapse.
CREATE OR REPLACE TEMP TABLE variants AS
SELECT
    order_id, position, kind, amount_cents, currency, event_day,
    dense_rank() OVER (PARTITION BY order_id ORDER BY position DESC) AS position_rank
FROM (
    SELECT DISTINCT order_id, position, kind, amount_cents, currency, event_day
    FROM staged
    WHERE reason IS NULL
);

CREATE OR REPLACE TEMP TABLE candidates AS
SELECT
    order_id,
    position,
    count(*) > 1 AS batch_conflict,
    CASE WHEN count(*) = 1 THEN any_value(kind) END         AS kind,
    CASE WHEN count(*) = 1 THEN any_value(amount_cents) END AS amount_cents,
    CASE WHEN count(*) = 1 THEN any_value(currency) END     AS currency,
    CASE WHEN count(*) = 1 THEN any_value(event_day) END    AS event_day
FROM variants
WHERE position_rank = 1
GROUP BY order_id, position;
