-- Schema v1 of merge_by_key: the declared columns, typed, and the row's
-- status ('active' or 'conflict'). No primary key: the rank step gives one
-- row per key, and the tests assert uniqueness.
CREATE OR REPLACE TABLE {{table}} (
    {{column_defs}},
    idem_status VARCHAR NOT NULL
);

-- The rows an application reads: active rows only.
CREATE OR REPLACE VIEW {{table:_active}} AS
SELECT {{columns}}
FROM {{table}}
WHERE idem_status = 'active';

-- One row per input row of every batch, values as received, with its outcome.
CREATE TABLE IF NOT EXISTS {{table:_outcomes}} (
    batch_id VARCHAR NOT NULL,
    {{text_column_defs}},
    outcome  VARCHAR NOT NULL
);

-- A column declared later joins the outcomes table; earlier rows hold NULL.
{{add_text_columns:_outcomes}};
