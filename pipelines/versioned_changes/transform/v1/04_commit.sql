-- Commit: write one decided row per entity (the rank step guarantees one),
-- append every input row's outcome (an erased subject's payload is not
-- kept, only that its change arrived), and name the written keys for idem's
-- snapshot history.
CREATE OR REPLACE TEMP TABLE idem_touched AS
SELECT entity_id FROM decisions WHERE write;

MERGE INTO {{table}} AS t
USING (
    SELECT
        entity_id,
        version AS source_version,
        CASE
            WHEN decision = 'conflict' THEN 'conflict'
            WHEN operation = 'delete' THEN 'deleted'
            ELSE 'active'
        END AS status,
        CASE WHEN decision = 'conflict' THEN NULL ELSE value END AS value
    FROM decisions
    WHERE write
) AS d
ON t.entity_id = d.entity_id
WHEN MATCHED THEN UPDATE SET
    source_version = d.source_version, status = d.status, value = d.value
WHEN NOT MATCHED THEN INSERT (entity_id, source_version, status, value)
    VALUES (d.entity_id, d.source_version, d.status, d.value);

INSERT INTO {{table:_outcomes}}
    (batch_id, change_id, entity_id, source_version, operation, value, outcome)
SELECT getvariable('idem_batch_id'), change_id, entity_id, raw_version, operation,
       CASE WHEN outcome = 'erased' THEN NULL ELSE value END, outcome
FROM outcomes
ORDER BY _row;
