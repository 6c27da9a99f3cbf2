-- Outcomes: each candidate against the stored row and the key's tombstone
-- (read inside the run's transaction), then one outcome per input row. A
-- key holds a row or a tombstone, never both.
--   upsert:
--     at or below the key's tombstone        -> stale (a deleted key comes
--                                               back only above its delete)
--     new key, or higher ordering value (always, without an ordering
--     column)                                -> accepted (conflict if the
--                                               batch holds distinct payloads)
--     lower ordering value                   -> stale
--     equal value, same payload              -> duplicate
--     equal value, other payload, or a stored conflict -> conflict
--   delete:
--     a stored row at or below it (always, without an ordering column)
--                                            -> accepted: the row goes, a
--                                               tombstone stays
--     a stored row above it                  -> stale
--     a tombstone at the same value (any, without an ordering column)
--                                            -> duplicate
--     a tombstone below it                   -> accepted (raised)
--     a tombstone above it                   -> stale
--     an unknown key                         -> accepted (a tombstone)
CREATE OR REPLACE TEMP TABLE decisions AS
WITH joined AS (
    SELECT
        c.*,
        t.idem_status    AS stored_status,
        {{order:t}}      AS stored_ord,
        {{payload_same:c:t}} AS same_payload,
        b.idem_tombstone IS NOT NULL AS tombstone,
        b.idem_order     AS tombstone_ord
    FROM candidates AS c
    LEFT JOIN {{table}} AS t ON {{key_match:c:t}}
    LEFT JOIN (SELECT *, TRUE AS idem_tombstone FROM {{table:_tombstones}}) AS b ON {{key_match:c:b}}
),
decided AS (
    SELECT
        *,
        CASE
            WHEN _op = 'delete' THEN
                CASE
                    WHEN stored_status IS NOT NULL THEN
                        CASE WHEN _ord IS NULL OR stored_ord IS NULL OR _ord >= stored_ord THEN 'accepted' ELSE 'stale' END
                    WHEN tombstone THEN
                        CASE
                            WHEN _ord IS NULL OR _ord = tombstone_ord THEN 'duplicate'
                            WHEN tombstone_ord IS NULL OR _ord > tombstone_ord THEN 'accepted'
                            ELSE 'stale'
                        END
                    ELSE 'accepted'
                END
            WHEN tombstone AND _ord <= tombstone_ord THEN 'stale'
            WHEN stored_status IS NULL OR stored_ord IS NULL OR _ord > stored_ord THEN
                CASE WHEN batch_conflict THEN 'conflict' ELSE 'accepted' END
            WHEN _ord < stored_ord THEN 'stale'
            WHEN stored_status = 'conflict' OR batch_conflict THEN 'conflict'
            WHEN same_payload THEN 'duplicate'
            ELSE 'conflict'
        END AS decision
    FROM joined
)
SELECT
    *,
    -- The row to write, or no write: a stale or duplicate candidate, or a
    -- conflict at a key already conflicting at that value, changes nothing.
    decision = 'accepted'
        OR (decision = 'conflict' AND NOT coalesce(stored_status = 'conflict' AND _ord = stored_ord, FALSE)) AS write
FROM decided;

CREATE OR REPLACE TEMP TABLE outcomes AS
SELECT
    s._row,
    s._raw,
    s._op,
    CASE
        WHEN s.reason IS NOT NULL THEN s.reason
        WHEN s._ord < d._ord THEN 'superseded_in_batch'
        ELSE d.decision
    END AS outcome
FROM staged AS s
LEFT JOIN decisions AS d ON {{key_match:s:d}};
