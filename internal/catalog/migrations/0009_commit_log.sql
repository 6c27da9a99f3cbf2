-- 0009: a commit's bookkeeping in fewer tables (issue 44). On DuckDB each
-- table a transaction appends to costs a fixed amount (an append set up
-- per column, its WAL entries, the checkpoint rewriting its row groups),
-- and a commit wrote one row into each of idem.runs, idem.commits,
-- idem.snapshots and idem.packets. Now:
--
-- * idem.runs is the commit log: a committing run's row carries the
--   commit's sequence number and the database's id (seq, db_id), NULL in
--   the row of a run that committed nothing. idem.commits is a view over
--   it, with row 0 (the database's id, 'created') read from idem.meta
--   (keys db_id and db_created_at).
-- * A release packet is a column of its snapshot's row (packet, NULL for
--   a snapshot without one); idem.packets is a view over idem.snapshots.
--
-- The ledger (its unique (job, batch_id) enforces that a batch applies
-- once) and the state rows of idem.jobs stay tables of their own.

ALTER TABLE idem.runs ADD COLUMN seq BIGINT;
ALTER TABLE idem.runs ADD COLUMN db_id VARCHAR;

INSERT INTO idem.meta (key, value) SELECT 'db_id', db_id FROM idem.commits WHERE seq = 0;
INSERT INTO idem.meta (key, value) SELECT 'db_created_at', CAST(committed_at AS VARCHAR) FROM idem.commits WHERE seq = 0;

-- Each commit's row goes onto the run log row its transaction wrote: the
-- same job, decision and time (both are the transaction's
-- current_timestamp), matched in order when there are several.
UPDATE idem.runs SET seq = m.seq, db_id = m.db_id FROM (
    SELECT c.db_id, c.seq, r.rid FROM
        (SELECT db_id, seq, job, kind, committed_at,
                row_number() OVER (PARTITION BY job, kind, committed_at ORDER BY seq) AS n
         FROM idem.commits WHERE seq > 0) AS c
    JOIN
        (SELECT rowid AS rid, job, decision, run_at,
                row_number() OVER (PARTITION BY job, decision, run_at ORDER BY rowid) AS n
         FROM idem.runs) AS r
    ON r.job = c.job AND r.decision = c.kind AND r.run_at = c.committed_at AND r.n = c.n
) AS m WHERE idem.runs.rowid = m.rid;

-- A commit without such a row (none is known) keeps its place in the
-- sequence as a run log row of its own that says so.
INSERT INTO idem.runs (job, run_at, decision, changed, seq, db_id, message)
SELECT coalesce(c.job, ''), coalesce(c.committed_at, TIMESTAMP '1970-01-01'), c.kind, '[]', c.seq, c.db_id,
       'a commit idem.commits recorded without a run log row (moved here by catalog version 9)'
FROM idem.commits AS c
WHERE c.seq > 0 AND NOT EXISTS (SELECT 1 FROM idem.runs AS r WHERE r.seq = c.seq AND r.db_id = c.db_id)
ORDER BY c.seq;

DROP TABLE idem.commits;
CREATE VIEW idem.commits AS
SELECT value AS db_id, CAST(0 AS BIGINT) AS seq, CAST(NULL AS VARCHAR) AS job, 'created' AS kind,
       TRY_CAST((SELECT value FROM idem.meta WHERE key = 'db_created_at') AS TIMESTAMP) AS committed_at
FROM idem.meta WHERE key = 'db_id'
UNION ALL
SELECT db_id, seq, job, decision, run_at FROM idem.runs WHERE seq IS NOT NULL;

-- A packet belongs to a snapshot row written in its transaction; one
-- without (written outside idem) is named rather than dropped.
SELECT error('idem.packets holds a release packet of snapshot ' || p.snapshot || ' of job ' || p.job
    || ', which idem.snapshots does not hold: written outside idem; nothing was changed')
FROM (SELECT job, snapshot FROM idem.packets AS p
      WHERE NOT EXISTS (SELECT 1 FROM idem.snapshots AS s WHERE s.job = p.job AND s.snapshot = p.snapshot)
      ORDER BY job, snapshot LIMIT 1) AS p;

ALTER TABLE idem.snapshots ADD COLUMN packet VARCHAR;
UPDATE idem.snapshots SET packet = p.packet FROM idem.packets AS p
WHERE p.job = idem.snapshots.job AND p.snapshot = idem.snapshots.snapshot;
DROP TABLE idem.packets;
CREATE VIEW idem.packets AS
SELECT job, snapshot, packet, committed_at AS recorded_at FROM idem.snapshots WHERE packet IS NOT NULL;
