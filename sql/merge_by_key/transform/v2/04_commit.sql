-- Commit: write one decided row per key (the rank step guarantees one; a
-- conflict keeps its key and ordering value with a NULL payload), remove
-- the row of a deleted key and keep its tombstone, clear the tombstone of
-- a key written again, append every input row's outcome with its
-- operation, and name the written keys for idem's snapshot history.
CREATE OR REPLACE TEMP TABLE writes AS
SELECT * FROM decisions WHERE write;

UPDATE writes SET {{null_payload}} WHERE decision = 'conflict';

CREATE OR REPLACE TEMP TABLE idem_touched AS
SELECT {{key}} FROM writes;

MERGE INTO {{table}} AS t
USING (
    SELECT
        {{columns}},
        _op,
        CASE WHEN decision = 'conflict' THEN 'conflict' ELSE 'active' END AS idem_status
    FROM writes
) AS d
ON {{key_match:t:d}}
WHEN MATCHED AND d._op = 'delete' THEN DELETE
WHEN MATCHED THEN UPDATE SET {{set_nonkey:d}}, idem_status = d.idem_status
WHEN NOT MATCHED AND d._op = 'upsert' THEN INSERT ({{columns}}, idem_status)
    VALUES ({{columns:d}}, d.idem_status);

MERGE INTO {{table:_tombstones}} AS b
USING (SELECT {{key}}, _ord, _op FROM writes) AS d
ON {{key_match:b:d}}
WHEN MATCHED AND d._op = 'delete' THEN UPDATE SET idem_order = d._ord
WHEN MATCHED THEN DELETE
WHEN NOT MATCHED AND d._op = 'delete' THEN INSERT ({{key}}, idem_order)
    VALUES ({{key:d}}, d._ord);

INSERT INTO {{table:_outcomes}} (batch_id, {{columns}}, idem_op, outcome)
SELECT getvariable('idem_batch_id'), {{raw_fields:_raw}}, _op, outcome
FROM outcomes
ORDER BY _row;
