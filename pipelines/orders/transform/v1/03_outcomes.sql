-- Outcomes: each candidate against the stored order (its live row and its
-- tombstone, read inside the run's transaction; the higher position is the
-- order's stored position), then one outcome per input row.
--   higher position (or unknown order) -> accepted (conflict, and no write,
--                                         if the batch holds distinct
--                                         payloads at that position)
--   lower position                     -> stale
--   equal position, same event         -> duplicate
--   equal position, other event        -> conflict, nothing written
CREATE OR REPLACE TEMP TABLE decisions AS
WITH joined AS (
    SELECT
        c.*,
        t.position     AS row_position,
        t.amount_cents AS row_amount_cents,
        t.currency     AS row_currency,
        t.event_day    AS row_event_day,
        b.position     AS tombstone_position,
        greatest(t.position, b.position) AS stored_position
    FROM candidates AS c
    LEFT JOIN {{table}} AS t ON t.order_id = c.order_id
    LEFT JOIN {{table:_tombstones}} AS b ON b.order_id = c.order_id
)
SELECT
    *,
    CASE
        WHEN stored_position IS NULL OR position > stored_position THEN
            CASE WHEN batch_conflict THEN 'conflict' ELSE 'accepted' END
        WHEN position < stored_position THEN 'stale'
        WHEN batch_conflict THEN 'conflict'
        WHEN kind = 'delete' AND tombstone_position = position THEN 'duplicate'
        WHEN kind = 'upsert' AND row_position = position
             AND amount_cents = row_amount_cents AND currency = row_currency
             AND event_day = row_event_day THEN 'duplicate'
        ELSE 'conflict'
    END AS decision,
    (stored_position IS NULL OR position > stored_position) AND NOT batch_conflict AS write
FROM joined;

CREATE OR REPLACE TEMP TABLE outcomes AS
SELECT
    s._row, s.order_id, s.raw_position, s.kind, s.raw_amount_cents,
    s.raw_event_day, s.raw_schema_version, s.raw_currency,
    CASE
        WHEN s.reason IS NOT NULL THEN s.reason
        WHEN s.position < d.position THEN 'superseded_in_batch'
        -- A later exact copy of the candidate event in the same batch.
        WHEN NOT d.batch_conflict AND row_number() OVER (
                 PARTITION BY s.order_id, s.position, s.kind, s.amount_cents, s.currency, s.event_day
                 ORDER BY s._row) > 1 THEN 'duplicate'
        ELSE d.decision
    END AS outcome
FROM staged AS s
LEFT JOIN decisions AS d ON d.order_id = s.order_id;
