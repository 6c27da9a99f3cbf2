-- 0002: a batch applies once, by construction. The batch identity guard
-- reads idem.ledger inside the writing transaction, so no two rows of one
-- (job, batch_id) can exist; a unique constraint makes it structural, for
-- any writer. The ledger is only ever inserted into (never updated or
-- deleted from), which is what DuckDB's unique checks handle well.
--
-- The constraint comes with a new table, the rows copied into it, rather
-- than with CREATE UNIQUE INDEX on the existing one: DuckDB 1.5.6 cannot
-- replay an index built over existing rows from the WAL on a read-only
-- open ("Could not write file"), so a kill between this migration's COMMIT
-- and its CHECKPOINT would lock every reader out, while a table created
-- with its constraint and filled by INSERT replays anywhere.

-- A ledger with a batch twice (written outside idem) is named rather than
-- left to the constraint's own error.
SELECT error('idem.ledger holds batch ' || batch_id || ' of job ' || job || ' ' || n || ' times, '
    || 'written outside idem: a batch applies once, so the ledger cannot take its unique constraint; nothing was changed')
FROM (SELECT job, batch_id, count(*) AS n FROM idem.ledger GROUP BY job, batch_id HAVING count(*) > 1
      ORDER BY job, batch_id LIMIT 1);

CREATE TABLE idem.ledger_0002 (
    job          VARCHAR NOT NULL,
    batch_id     VARCHAR NOT NULL,
    digest       VARCHAR NOT NULL,
    input_digest VARCHAR NOT NULL,
    from_pos     BIGINT,
    to_pos       BIGINT,
    rows_in      BIGINT NOT NULL,
    outcomes     VARCHAR NOT NULL,
    snapshot     BIGINT NOT NULL,
    committed_at TIMESTAMP,
    UNIQUE (job, batch_id)
);
INSERT INTO idem.ledger_0002 BY NAME SELECT * FROM idem.ledger;
DROP TABLE idem.ledger;
ALTER TABLE idem.ledger_0002 RENAME TO ledger;
