-- Commit: replace the row of every written order (an upsert writes the row
-- and clears its tombstone, a delete removes the row and writes its
-- tombstone), append every input row's outcome, name the written keys for
-- idem's snapshot history, and check the balance before COMMIT.
CREATE OR REPLACE TEMP TABLE idem_touched AS
SELECT order_id FROM decisions WHERE write;

DELETE FROM {{table}}
WHERE order_id IN (SELECT order_id FROM idem_touched);

INSERT INTO {{table}} (order_id, position, amount_cents, currency, event_day)
SELECT order_id, position, amount_cents, currency, event_day
FROM decisions
WHERE write AND kind = 'upsert'
ORDER BY order_id;

DELETE FROM {{table:_tombstones}}
WHERE order_id IN (SELECT order_id FROM idem_touched);

INSERT INTO {{table:_tombstones}} (order_id, position)
SELECT order_id, position
FROM decisions
WHERE write AND kind = 'delete'
ORDER BY order_id;

-- An erased order's row keeps only its line and position: neither its key
-- nor its payload is stored again.
INSERT INTO {{table:_outcomes}}
    (batch_id, line, order_id, position, kind, amount_cents, event_day, schema_version, currency, outcome)
SELECT
    getvariable('idem_batch_id'), _row,
    CASE WHEN outcome <> 'erased' THEN order_id END,
    raw_position,
    CASE WHEN outcome <> 'erased' THEN kind END,
    CASE WHEN outcome <> 'erased' THEN raw_amount_cents END,
    CASE WHEN outcome <> 'erased' THEN raw_event_day END,
    CASE WHEN outcome <> 'erased' THEN raw_schema_version END,
    CASE WHEN outcome <> 'erased' THEN raw_currency END,
    outcome
FROM outcomes
ORDER BY _row;

-- Accepted plus rejected equals the rows read: every row of the input has
-- exactly one stored outcome of a known kind. error() aborts the whole
-- transaction, so an imbalance commits nothing.
SELECT CASE
    WHEN (SELECT count(*) FROM input) <> (
            SELECT count(*) FROM {{table:_outcomes}}
            WHERE batch_id = getvariable('idem_batch_id'))
        THEN error('orders: outcomes do not balance the rows read; nothing committed')
    WHEN EXISTS (
            SELECT 1 FROM outcomes
            WHERE outcome IS NULL OR NOT (outcome LIKE 'invalid\_%' ESCAPE '\' OR outcome IN
                ('accepted', 'stale', 'duplicate', 'conflict', 'superseded_in_batch', 'erased')))
        THEN error('orders: a row has no known outcome; nothing committed')
END;
