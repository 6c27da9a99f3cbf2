-- Commit: write one decided row per key (the rank step guarantees one; a
-- conflict keeps its key and ordering value with a NULL payload), append
-- every input row's outcome, and name the written keys for idem's snapshot
-- history.
CREATE OR REPLACE TEMP TABLE writes AS
SELECT * FROM decisions WHERE write;

UPDATE writes SET {{null_payload}} WHERE decision = 'conflict';

CREATE OR REPLACE TEMP TABLE idem_touched AS
SELECT {{key}} FROM writes;

MERGE INTO {{table}} AS t
USING (
    SELECT
        {{columns}},
        CASE WHEN decision = 'conflict' THEN 'conflict' ELSE 'active' END AS idem_status
    FROM writes
) AS d
ON {{key_match:t:d}}
WHEN MATCHED THEN UPDATE SET {{set_nonkey:d}}, idem_status = d.idem_status
WHEN NOT MATCHED THEN INSERT ({{columns}}, idem_status)
    VALUES ({{columns:d}}, d.idem_status);

INSERT INTO {{table:_outcomes}} (batch_id, {{columns}}, outcome)
SELECT getvariable('idem_batch_id'), {{raw_fields:_raw}}, outcome
FROM outcomes
ORDER BY _row;
