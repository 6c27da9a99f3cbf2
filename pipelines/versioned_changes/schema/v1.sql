-- Schema v1 of versioned_changes. The target keeps every entity's row,
-- tombstones and conflicts included. No primary key: the rank step gives one
-- candidate per entity, and the tests assert uniqueness (an index would cost
-- about 3x on bulk writes and COMMIT).
CREATE OR REPLACE TABLE {{table}} (
    entity_id      VARCHAR NOT NULL,
    source_version BIGINT  NOT NULL,
    status         VARCHAR NOT NULL,
    value          VARCHAR
);

-- The entities an application reads: active rows only.
CREATE OR REPLACE VIEW {{table:_active}} AS
SELECT entity_id, source_version, value
FROM {{table}}
WHERE status = 'active';

-- One row per input row of every batch, as received, with its outcome.
CREATE TABLE IF NOT EXISTS {{table:_outcomes}} (
    batch_id       VARCHAR NOT NULL,
    change_id      VARCHAR,
    entity_id      VARCHAR,
    source_version VARCHAR,
    operation      VARCHAR,
    value          VARCHAR,
    outcome        VARCHAR NOT NULL
);
