-- Stage: the batch's rows as received (text), their typed version, and the
-- first rule each invalid row fails, in the contract's order. Blank means
-- empty after trimming white space. A valid row of an erased entity at or
-- below the erasure point is dropped as 'erased'.
CREATE OR REPLACE TEMP TABLE staged AS
WITH raw AS (
    SELECT
        row_number() OVER () AS _row,
        CAST(change_id AS VARCHAR)      AS change_id,
        CAST(entity_id AS VARCHAR)      AS entity_id,
        CAST(source_version AS VARCHAR) AS raw_version,
        CAST(operation AS VARCHAR)      AS operation,
        CAST(value AS VARCHAR)          AS value
    FROM input
), typed AS (
    SELECT
        *,
        CASE WHEN regexp_full_match(raw_version, '\s*\+?[0-9]{1,18}\s*')
             THEN CAST(trim(raw_version, E' \t\n\r\f\v+') AS BIGINT) END AS version
    FROM raw
), checked AS (
    SELECT
        *,
        CASE
            WHEN change_id IS NULL OR regexp_full_match(change_id, '\s*') THEN 'invalid_change_id'
            WHEN entity_id IS NULL OR regexp_full_match(entity_id, '\s*') THEN 'invalid_entity_id'
            WHEN version IS NULL OR version < 1 THEN 'invalid_version'
            WHEN operation IS NULL OR operation NOT IN ('upsert', 'delete') THEN 'invalid_operation'
            WHEN (operation = 'upsert' AND value IS NULL)
              OR (operation = 'delete' AND value IS NOT NULL) THEN 'invalid_payload'
        END AS reason
    FROM typed
)
SELECT
    c.* EXCLUDE (reason),
    CASE
        WHEN c.reason IS NOT NULL THEN c.reason
        WHEN e.position IS NOT NULL AND c.version <= e.position THEN 'erased'
    END AS reason
FROM checked AS c
LEFT JOIN idem_erased AS e ON e.key = c.entity_id;
