-- Outcomes: each candidate against the stored row (read inside the run's
-- transaction), then one outcome per input row.
--   new key, or higher ordering value (always, without an ordering column)
--       -> accepted (conflict if the batch itself holds distinct payloads)
--   lower ordering value                   -> stale
--   equal value, same payload              -> duplicate
--   equal value, other payload, or a stored conflict -> conflict
CREATE OR REPLACE TEMP TABLE decisions AS
WITH joined AS (
    SELECT
        c.*,
        t.idem_status    AS stored_status,
        {{order:t}}      AS stored_ord,
        {{payload_same:c:t}} AS same_payload
    FROM candidates AS c
    LEFT JOIN {{table}} AS t ON {{key_match:c:t}}
)
SELECT
    *,
    CASE
        WHEN stored_status IS NULL OR stored_ord IS NULL OR _ord > stored_ord THEN
            CASE WHEN batch_conflict THEN 'conflict' ELSE 'accepted' END
        WHEN _ord < stored_ord THEN 'stale'
        WHEN stored_status = 'conflict' OR batch_conflict THEN 'conflict'
        WHEN same_payload THEN 'duplicate'
        ELSE 'conflict'
    END AS decision,
    -- The row to write, or no write: a stale, duplicate or already
    -- conflicting candidate changes nothing.
    CASE
        WHEN stored_status IS NULL OR stored_ord IS NULL OR _ord > stored_ord THEN TRUE
        WHEN _ord = stored_ord AND stored_status <> 'conflict'
             AND (batch_conflict OR NOT same_payload) THEN TRUE
        ELSE FALSE
    END AS write
FROM joined;

CREATE OR REPLACE TEMP TABLE outcomes AS
SELECT
    s._row,
    s._raw,
    CASE
        WHEN s.reason IS NOT NULL THEN s.reason
        WHEN s._ord < d._ord THEN 'superseded_in_batch'
        ELSE d.decision
    END AS outcome
FROM staged AS s
LEFT JOIN decisions AS d ON {{key_match:s:d}};
