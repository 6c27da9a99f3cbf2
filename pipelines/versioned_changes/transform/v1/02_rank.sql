-- Rank: the distinct payload variants of each entity's valid rows (exact
-- repeats collapse), ranked by version, highest first. The candidate of an
-- entity is its highest version; more than one variant there is an in-batch
-- conflict. dense_rank gives equal versions one rank, so no tie is broken
-- by chance. One statement: the variants are not materialized.
CREATE OR REPLACE TEMP TABLE candidates AS
WITH variants AS (
    SELECT
        entity_id, version, operation, value,
        dense_rank() OVER (PARTITION BY entity_id ORDER BY version DESC) AS version_rank
    FROM (
        SELECT DISTINCT entity_id, version, operation, value
        FROM staged
        WHERE reason IS NULL
    )
)
SELECT
    entity_id,
    version,
    count(*) > 1 AS batch_conflict,
    CASE WHEN count(*) = 1 THEN any_value(operation) END AS operation,
    CASE WHEN count(*) = 1 THEN any_value(value) END AS value
FROM variants
WHERE version_rank = 1
GROUP BY entity_id, version;
