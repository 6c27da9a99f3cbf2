-- Stage: the batch's rows as received (text), typed, and the first rule each
-- invalid row fails, in this order:
--   invalid_order_id        missing or blank
--   invalid_position        not a whole number >= 1
--   invalid_kind            not 'upsert' or 'delete'
--   invalid_schema_version  not 2 or 3
--   invalid_amount          upsert without whole, non-negative cents (7350, not 73.50)
--   invalid_currency        upsert: v2 carrying a currency (v2 is always INR),
--                           or v3 without a three-letter upper-case code
--   invalid_event_day       upsert without a whole, non-negative day number
-- A delete needs only order_id, position, kind and schema_version; its other
-- fields are not read. A valid row of an erased order at or below the
-- erasure point is dropped as 'erased'.
CREATE OR REPLACE TEMP TABLE staged AS
WITH raw AS (
    SELECT
        row_number() OVER () AS _row,
        CAST(order_id AS VARCHAR)       AS order_id,
        CAST(position AS VARCHAR)       AS raw_position,
        CAST(kind AS VARCHAR)           AS kind,
        CAST(amount_cents AS VARCHAR)   AS raw_amount_cents,
        CAST(event_day AS VARCHAR)      AS raw_event_day,
        CAST(schema_version AS VARCHAR) AS raw_schema_version,
        CAST(currency AS VARCHAR)       AS raw_currency
    FROM input
), typed AS (
    SELECT
        *,
        CASE WHEN regexp_full_match(raw_position, '[0-9]{1,18}')
             THEN CAST(raw_position AS BIGINT) END AS position,
        CASE WHEN regexp_full_match(raw_amount_cents, '[0-9]{1,18}')
             THEN CAST(raw_amount_cents AS BIGINT) END AS amount_cents,
        CASE WHEN regexp_full_match(raw_event_day, '[0-9]{1,9}')
             THEN CAST(raw_event_day AS INTEGER) END AS event_day,
        CASE raw_schema_version WHEN '2' THEN 2 WHEN '3' THEN 3 END AS schema_version
    FROM raw
), decoded AS (
    SELECT
        *,
        CASE
            WHEN schema_version = 2 AND raw_currency IS NULL THEN 'INR'
            WHEN schema_version = 3 AND regexp_full_match(raw_currency, '[A-Z]{3}') THEN raw_currency
        END AS currency
    FROM typed
), checked AS (
    SELECT
        *,
        CASE
            WHEN order_id IS NULL OR regexp_full_match(order_id, '\s*') THEN 'invalid_order_id'
            WHEN position IS NULL OR position < 1 THEN 'invalid_position'
            WHEN kind IS NULL OR kind NOT IN ('upsert', 'delete') THEN 'invalid_kind'
            WHEN schema_version IS NULL THEN 'invalid_schema_version'
            WHEN kind = 'upsert' AND amount_cents IS NULL THEN 'invalid_amount'
            WHEN kind = 'upsert' AND currency IS NULL THEN 'invalid_currency'
            WHEN kind = 'upsert' AND event_day IS NULL THEN 'invalid_event_day'
        END AS reason
    FROM decoded
)
SELECT
    c.* EXCLUDE (reason, amount_cents, currency, event_day),
    -- A delete's payload is empty, so equal deletes compare equal.
    CASE WHEN c.kind = 'upsert' THEN c.amount_cents END AS amount_cents,
    CASE WHEN c.kind = 'upsert' THEN c.currency END AS currency,
    CASE WHEN c.kind = 'upsert' THEN c.event_day END AS event_day,
    CASE
        WHEN c.reason IS NOT NULL THEN c.reason
        WHEN e.position IS NOT NULL AND c.position <= e.position THEN 'erased'
    END AS reason
FROM checked AS c
LEFT JOIN idem_erased AS e ON e.key = c.order_id;
