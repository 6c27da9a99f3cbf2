-- Schema v1: one row per id.
CREATE OR REPLACE TABLE {{table}} (
    id    BIGINT  NOT NULL,
    name  VARCHAR NOT NULL,
    score INTEGER NOT NULL
);

-- One row per input row of the input the target holds, with its outcome.
CREATE OR REPLACE TABLE {{table:_outcomes}} (
    id      VARCHAR,
    name    VARCHAR,
    score   VARCHAR,
    outcome VARCHAR NOT NULL
);
