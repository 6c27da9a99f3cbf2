-- Schema v1 of the sample target: one row per kept record.
CREATE OR REPLACE TABLE {{table}} (
    id         BIGINT PRIMARY KEY,
    species_id BIGINT NOT NULL,
    year       INTEGER,
    license    VARCHAR NOT NULL
);

-- One row per input row of the snapshot the target holds, with its outcome.
CREATE OR REPLACE TABLE {{table:_outcomes}} (
    id         VARCHAR,
    species_id VARCHAR,
    year       VARCHAR,
    license    VARCHAR,
    outcome    VARCHAR NOT NULL
);
