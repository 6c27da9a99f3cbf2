-- Outcomes: each candidate against the stored row (read inside the run's
-- transaction), then one outcome per input row.
--   higher version (or unknown entity) -> accepted (conflict if the batch
--     itself holds distinct payloads at that version)
--   lower version                      -> stale
--   equal version, same payload        -> duplicate
--   equal version, other payload, or a stored conflict -> conflict
CREATE OR REPLACE TEMP TABLE decisions AS
WITH joined AS (
    SELECT
        c.*,
        t.source_version AS stored_version,
        t.status         AS stored_status,
        t.value          AS stored_value
    FROM candidates AS c
    LEFT JOIN {{table}} AS t ON t.entity_id = c.entity_id
)
SELECT
    *,
    CASE
        WHEN stored_version IS NULL OR version > stored_version THEN
            CASE WHEN batch_conflict THEN 'conflict' ELSE 'accepted' END
        WHEN version < stored_version THEN 'stale'
        WHEN stored_status = 'conflict' OR batch_conflict THEN 'conflict'
        WHEN (operation = 'delete') = (stored_status = 'deleted')
             AND value IS NOT DISTINCT FROM stored_value THEN 'duplicate'
        ELSE 'conflict'
    END AS decision,
    -- The row to write, or no write: a stale, duplicate or already
    -- conflicting candidate changes nothing.
    CASE
        WHEN stored_version IS NULL OR version > stored_version THEN TRUE
        WHEN version = stored_version AND stored_status <> 'conflict'
             AND (batch_conflict OR (operation = 'delete') <> (stored_status = 'deleted')
                  OR value IS DISTINCT FROM stored_value) THEN TRUE
        ELSE FALSE
    END AS write
FROM joined;

-- A view, not a table: the commit step's insert and idem's count each read
-- it once, which costs less than materializing one row per input row.
CREATE OR REPLACE TEMP VIEW outcomes AS
SELECT
    s._row, s.change_id, s.entity_id, s.raw_version, s.operation, s.value,
    CASE
        WHEN s.reason IS NOT NULL THEN s.reason
        WHEN s.version < d.version THEN 'superseded_in_batch'
        ELSE d.decision
    END AS outcome
FROM staged AS s
LEFT JOIN decisions AS d ON d.entity_id = s.entity_id;
