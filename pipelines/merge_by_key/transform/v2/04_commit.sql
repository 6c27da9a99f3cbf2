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

-- A written key's row is deleted and, for an upsert, inserted again: on a
-- large table, a delete and an insert commit several times faster than
-- the same rows updated in place by MERGE (v1).
DELETE FROM {{table}}
WHERE ({{key}}) IN (SELECT ({{key}}) FROM idem_touched);

INSERT INTO {{table}} ({{columns}}, idem_status)
SELECT
    {{columns}},
    CASE WHEN decision = 'conflict' THEN 'conflict' ELSE 'active' END
FROM writes
WHERE _op = 'upsert'
ORDER BY {{key}};

DELETE FROM {{table:_tombstones}}
WHERE ({{key}}) IN (SELECT ({{key}}) FROM idem_touched);

INSERT INTO {{table:_tombstones}} ({{key}}, idem_order)
SELECT {{key}}, _ord
FROM writes
WHERE _op = 'delete'
ORDER BY {{key}};

INSERT INTO {{table:_outcomes}} (batch_id, {{columns}}, idem_op, outcome)
SELECT getvariable('idem_batch_id'), {{raw_fields:_raw}}, _op, outcome
FROM outcomes
ORDER BY _row;
