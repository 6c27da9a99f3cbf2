-- 0002: a batch applies once, by construction. The batch identity guard
-- reads idem.ledger inside the writing transaction, so no two rows of one
-- (job, batch_id) can exist; the unique index makes it structural, for any
-- writer. The ledger is only ever inserted into (never updated or deleted
-- from), which is what DuckDB's unique indexes handle well.

-- A ledger with a batch twice (written by hand) is named rather than left
-- to the index's own error.
SELECT error('idem.ledger holds batch ' || batch_id || ' of job ' || job || ' ' || n || ' times, '
    || 'written outside idem: a batch applies once, so its unique index cannot be built; nothing was changed')
FROM (SELECT job, batch_id, count(*) AS n FROM idem.ledger GROUP BY job, batch_id HAVING count(*) > 1
      ORDER BY job, batch_id LIMIT 1);

CREATE UNIQUE INDEX IF NOT EXISTS ledger_batch_once ON idem.ledger (job, batch_id);
