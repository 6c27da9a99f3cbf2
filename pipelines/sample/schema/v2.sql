-- Schema v2 of the sample target: v1 plus a CHECK on the license.
CREATE OR REPLACE TABLE {{table}} (
    id         BIGINT PRIMARY KEY,
    species_id BIGINT NOT NULL,
    year       INTEGER,
    license    VARCHAR NOT NULL CHECK (license IN ('CC0 1.0', 'CC BY 4.0'))
);

-- One row per input row of the snapshot the target holds, with its outcome.
CREATE OR REPLACE TABLE {{table:_outcomes}} (
    id         VARCHAR,
    species_id VARCHAR,
    year       VARCHAR,
    license    VARCHAR,
    outcome    VARCHAR NOT NULL
);
