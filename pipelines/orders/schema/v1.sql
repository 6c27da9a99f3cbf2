-- Schema v1 of orders. The target holds the current (live) orders only: a
-- deleted order has no row here. No primary key: the rank step gives one
-- candidate per order, and the tests assert uniqueness.
CREATE OR REPLACE TABLE {{table}} (
    order_id     VARCHAR NOT NULL,
    position     BIGINT  NOT NULL,
    amount_cents BIGINT  NOT NULL,
    currency     VARCHAR NOT NULL,
    event_day    INTEGER NOT NULL
);

-- One row per deleted order: the position of its delete. An event at or
-- below it is stale, so a replay or a late correction cannot resurrect the
-- order. Tombstones are a high-water mark of the source and are not part of
-- the snapshot history: a rollback restores rows, never lowers a tombstone.
CREATE TABLE IF NOT EXISTS {{table:_tombstones}} (
    order_id VARCHAR NOT NULL,
    position BIGINT  NOT NULL
);

-- One row per input row of every batch, as received (text), with its
-- outcome. line is the row's number in the batch.
CREATE TABLE IF NOT EXISTS {{table:_outcomes}} (
    batch_id       VARCHAR NOT NULL,
    line           BIGINT  NOT NULL,
    order_id       VARCHAR,
    position       VARCHAR,
    kind           VARCHAR,
    amount_cents   VARCHAR,
    event_day      VARCHAR,
    schema_version VARCHAR,
    currency       VARCHAR,
    outcome        VARCHAR NOT NULL
);
