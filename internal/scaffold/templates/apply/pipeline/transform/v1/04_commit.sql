-- Commit: one written row per id, every input row's outcome, and the
-- written ids for idem's snapshot history (temp table idem_touched).
CREATE OR REPLACE TEMP TABLE idem_touched AS
SELECT id FROM decisions WHERE write;

MERGE INTO {{table}} AS t
USING (
    SELECT
        id,
        CASE WHEN decision = 'conflict' THEN NULL ELSE value END AS value,
        updated_at,
        CASE WHEN decision = 'conflict' THEN 'conflict' ELSE 'active' END AS idem_status
    FROM decisions
    WHERE write
) AS d
ON t.id = d.id
WHEN MATCHED THEN UPDATE SET value = d.value, updated_at = d.updated_at, idem_status = d.idem_status
WHEN NOT MATCHED THEN INSERT (id, value, updated_at, idem_status)
    VALUES (d.id, d.value, d.updated_at, d.idem_status);

INSERT INTO {{table:_outcomes}} (batch_id, id, value, updated_at, outcome)
SELECT getvariable('idem_batch_id'), raw_id, raw_value, raw_updated_at, outcome
FROM outcomes
ORDER BY _row;
