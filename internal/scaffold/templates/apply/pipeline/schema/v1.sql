-- Schema v1: one row per id. No primary key: the rank step gives one row
-- per id (an index costs about 3x on bulk writes).
CREATE OR REPLACE TABLE {{table}} (
    id          BIGINT  NOT NULL,
    value       VARCHAR,
    updated_at  BIGINT  NOT NULL,
    idem_status VARCHAR NOT NULL  -- 'active' or 'conflict'
);

CREATE OR REPLACE VIEW {{table:_active}} AS
SELECT id, value, updated_at FROM {{table}} WHERE idem_status = 'active';

-- One row per input row of every batch, values as received, with its outcome.
CREATE TABLE IF NOT EXISTS {{table:_outcomes}} (
    batch_id   VARCHAR NOT NULL,
    id         VARCHAR,
    value      VARCHAR,
    updated_at VARCHAR,
    outcome    VARCHAR NOT NULL
);
