-- Outcomes: each candidate against the stored row, then one outcome per
-- input row: accepted, stale, duplicate, conflict, superseded_in_batch, or
-- the stage step's reason.
CREATE OR REPLACE TEMP TABLE decisions AS
WITH joined AS (
    SELECT
        c.*,
        t.idem_status AS stored_status,
        t.updated_at  AS stored_updated_at,
        t.value       AS stored_value
    FROM candidates AS c
    LEFT JOIN {{table}} AS t ON t.id = c.id
)
SELECT
    *,
    CASE
        WHEN stored_status IS NULL OR updated_at > stored_updated_at THEN
            CASE WHEN batch_conflict THEN 'conflict' ELSE 'accepted' END
        WHEN updated_at < stored_updated_at THEN 'stale'
        WHEN stored_status = 'conflict' OR batch_conflict THEN 'conflict'
        WHEN value IS NOT DISTINCT FROM stored_value THEN 'duplicate'
        ELSE 'conflict'
    END AS decision,
    CASE
        WHEN stored_status IS NULL OR updated_at > stored_updated_at THEN TRUE
        WHEN updated_at = stored_updated_at AND stored_status <> 'conflict'
             AND (batch_conflict OR value IS DISTINCT FROM stored_value) THEN TRUE
        ELSE FALSE
    END AS write
FROM joined;

CREATE OR REPLACE TEMP TABLE outcomes AS
SELECT
    s._row, s.raw_id, s.raw_value, s.raw_updated_at,
    CASE
        WHEN s.reason IS NOT NULL THEN s.reason
        WHEN s.updated_at < d.updated_at THEN 'superseded_in_batch'
        ELSE d.decision
    END AS outcome
FROM staged AS s
LEFT JOIN decisions AS d ON d.id = s.id;
