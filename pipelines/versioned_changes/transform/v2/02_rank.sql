-- Rank and decide (transform v2): v1's rank and outcomes decisions in one
-- statement, one grouping of the valid rows by entity and one table
-- written. A valid row's operation follows from its value (an upsert has
-- one, a delete none), so the distinct payloads at a version are its
-- distinct values, NULL one of them. max({version, value}) holds the
-- entity's highest version and the greatest value there, min({-version,
-- value}) the same version and the least value there (struct order is
-- total, NULL last): the two values differ exactly when the highest
-- version holds more than one payload, an in-batch conflict. v1 counted
-- the variants of DISTINCT rows ranked by dense_rank; the candidates are
-- the same.
--
-- Each candidate is then judged against the stored row (read inside the
-- run's transaction):
--   higher version (or unknown entity) -> accepted (conflict if the batch
--     itself holds distinct payloads at that version)
--   lower version                      -> stale
--   equal version, same payload        -> duplicate
--   equal version, other payload, or a stored conflict -> conflict
CREATE OR REPLACE TEMP TABLE decisions AS
WITH ranked AS (
    SELECT
        entity_id,
        max({v: version, x: value}) AS hi,
        min({v: -version, x: value}) AS lo
    FROM staged
    WHERE reason IS NULL
    GROUP BY entity_id
), candidates AS (
    SELECT
        entity_id,
        hi.v AS version,
        hi.x IS DISTINCT FROM lo.x AS batch_conflict,
        CASE WHEN hi.x IS NOT DISTINCT FROM lo.x THEN
            CASE WHEN hi.x IS NULL THEN 'delete' ELSE 'upsert' END
        END AS operation,
        CASE WHEN hi.x IS NOT DISTINCT FROM lo.x THEN hi.x END AS value
    FROM ranked
), joined AS (
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
