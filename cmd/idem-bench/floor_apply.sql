-- The floor of an apply run of versioned_changes: the same decisions, the
-- same target writes, the same outcome rows and the same history, ledger,
-- snapshot, state and run-log rows as `idem run`, written by hand as one
-- script in one transaction. Not included (idem-only work): the input's
-- sha256, the retained copy of the input, the job-key / released-SQL /
-- epoch / cursor guards, erasures, the balance check. The Parquet columns
-- are typed, so validation uses the types instead of regular expressions.
-- Variables set by the bench: input, batch_id, job.
SET VARIABLE snap = (SELECT snapshot + 1 FROM idem.jobs WHERE job = getvariable('job'));

CREATE TEMP TABLE staged AS
SELECT
    row_number() OVER () AS _row,
    change_id, entity_id,
    CAST(source_version AS VARCHAR) AS raw_version,
    source_version AS version,
    operation, value,
    CASE
        WHEN change_id IS NULL OR trim(change_id, E' \t\n\r\f') = '' THEN 'invalid_change_id'
        WHEN entity_id IS NULL OR trim(entity_id, E' \t\n\r\f') = '' THEN 'invalid_entity_id'
        WHEN source_version IS NULL OR source_version < 1 OR source_version > 999999999999999999 THEN 'invalid_version'
        WHEN operation IS NULL OR operation NOT IN ('upsert', 'delete') THEN 'invalid_operation'
        WHEN (operation = 'upsert' AND value IS NULL) OR (operation = 'delete' AND value IS NOT NULL) THEN 'invalid_payload'
    END AS reason
FROM read_parquet(getvariable('input'));

-- One candidate per entity: its highest valid version; distinct payloads
-- there are an in-batch conflict. (The formulation of idem's rank step: of
-- the ones tried, a GROUP BY with min/max or count(DISTINCT) was slower.)
CREATE TEMP TABLE decided AS
WITH cand AS (
    SELECT entity_id, version,
           count(*) > 1 AS batch_conflict,
           any_value(operation) AS operation, any_value(value) AS value
    FROM (
        SELECT entity_id, version, operation, value,
               dense_rank() OVER (PARTITION BY entity_id ORDER BY version DESC) AS r
        FROM (SELECT DISTINCT entity_id, version, operation, value FROM staged WHERE reason IS NULL)
    )
    WHERE r = 1
    GROUP BY entity_id, version
)
SELECT c.*,
    CASE
        WHEN t.source_version IS NULL OR c.version > t.source_version THEN
            CASE WHEN batch_conflict THEN 'conflict' ELSE 'accepted' END
        WHEN c.version < t.source_version THEN 'stale'
        WHEN t.status = 'conflict' OR batch_conflict THEN 'conflict'
        WHEN (c.operation = 'delete') = (t.status = 'deleted') AND c.value IS NOT DISTINCT FROM t.value THEN 'duplicate'
        ELSE 'conflict'
    END AS decision,
    t.source_version IS NULL OR c.version > t.source_version
        OR (c.version = t.source_version AND t.status <> 'conflict'
            AND (batch_conflict OR (c.operation = 'delete') <> (t.status = 'deleted') OR c.value IS DISTINCT FROM t.value)) AS write
FROM cand AS c LEFT JOIN changes AS t ON t.entity_id = c.entity_id;

MERGE INTO changes AS t
USING (
    SELECT entity_id, version AS source_version,
        CASE WHEN decision = 'conflict' THEN 'conflict' WHEN operation = 'delete' THEN 'deleted' ELSE 'active' END AS status,
        CASE WHEN decision = 'conflict' THEN NULL ELSE value END AS value
    FROM decided WHERE write
) AS d
ON t.entity_id = d.entity_id
WHEN MATCHED THEN UPDATE SET source_version = d.source_version, status = d.status, value = d.value
WHEN NOT MATCHED THEN INSERT (entity_id, source_version, status, value) VALUES (d.entity_id, d.source_version, d.status, d.value);

INSERT INTO changes_outcomes (batch_id, change_id, entity_id, source_version, operation, value, outcome)
SELECT getvariable('batch_id'), s.change_id, s.entity_id, s.raw_version, s.operation, s.value,
    CASE
        WHEN s.reason IS NOT NULL THEN s.reason
        WHEN s.version < d.version THEN 'superseded_in_batch'
        ELSE d.decision
    END
FROM staged AS s LEFT JOIN decided AS d ON d.entity_id = s.entity_id
ORDER BY s._row;

-- History: close the open rows of written keys, open their new rows.
UPDATE idem.bench_changes__history AS h SET idem_to = getvariable('snap')
FROM (SELECT entity_id FROM decided WHERE write) AS w
WHERE h.idem_to IS NULL AND h.entity_id = w.entity_id;

INSERT INTO idem.bench_changes__history (entity_id, source_version, status, value, idem_from, idem_to)
SELECT entity_id, source_version, status, value, getvariable('snap'), NULL
FROM changes WHERE entity_id IN (SELECT entity_id FROM decided WHERE write);

-- Bookkeeping rows.
SET VARIABLE counts = (
    SELECT to_json(map(list(outcome ORDER BY outcome), list(n ORDER BY outcome)))::VARCHAR
    FROM (SELECT outcome, count(*) AS n FROM changes_outcomes WHERE batch_id = getvariable('batch_id') GROUP BY outcome));
SET VARIABLE rows_in = (SELECT count(*) FROM staged);

INSERT INTO idem.ledger VALUES (getvariable('job'), getvariable('batch_id'), 'floor', 'floor', NULL, NULL,
    getvariable('rows_in'), getvariable('counts'), getvariable('snap'), current_timestamp);
INSERT INTO idem.snapshots (job, snapshot, parent, kind, batch_id, job_key, parts, inputs, rows_in, rows_out,
    outcomes, columns, key_columns, packet, committed_at)
VALUES (getvariable('job'), getvariable('snap'), getvariable('snap') - 1, 'applied',
    getvariable('batch_id'), 'floor', '{}', '{}', getvariable('rows_in'), (SELECT count(*) FROM changes),
    getvariable('counts'), '[]', '["entity_id"]', NULL, current_timestamp);
UPDATE idem.jobs SET snapshot = getvariable('snap'), updated_at = current_timestamp WHERE job = getvariable('job');
-- The run log row is the commit log's (catalog version 9): it carries
-- the commit's sequence number and the database's id, as idem's does.
INSERT INTO idem.runs (job, run_at, batch_id, decision, changed, rows_in, outcomes, snapshot, cursor, epoch, message, seq, db_id)
VALUES (getvariable('job'), current_timestamp, getvariable('batch_id'), 'applied', '[]',
    getvariable('rows_in'), getvariable('counts'), getvariable('snap'), 0, 1, NULL,
    (SELECT max(seq) FROM idem.commits) + 1, (SELECT value FROM idem.meta WHERE key = 'db_id'));
