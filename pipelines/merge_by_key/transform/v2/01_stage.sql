-- Stage (v2: deletes). Version 2 reads what each input row does (its
-- operation): column idem_op of an upstream job's changes ('upsert' or
-- 'delete'); every row of a file input is an upsert. A deleted key leaves
-- a tombstone in <table>_tombstones: its key and the ordering value of the
-- delete. Both companions are made here on first use, so a job moves from
-- v1 to v2 without a schema change.
CREATE TABLE IF NOT EXISTS {{table:_tombstones}} AS
SELECT {{key}}, {{order}} AS idem_order
FROM {{table}}
LIMIT 0;

ALTER TABLE {{table:_outcomes}} ADD COLUMN IF NOT EXISTS idem_op VARCHAR;

-- Every input row with its values as received (_raw), its operation
-- (_op), typed to the declared types, its ordering value (_ord; NULL
-- without an ordering column) and the first check it fails: a value that
-- does not cast to its column's type, a NULL key column, a NULL ordering
-- value, an unknown operation. Quality rules are applied by the runner
-- right after this step.
CREATE OR REPLACE TEMP TABLE staged AS
WITH raw AS (
    SELECT
        row_number() OVER () AS _row,
        {{raw_struct}} AS _raw,
        {{type_error}} AS _type_error,
        CAST({{input_op}} AS VARCHAR) AS _op,
        {{typed_columns}}
    FROM input
)
SELECT
    _row,
    _raw,
    _op,
    {{columns}},
    {{order}} AS _ord,
    CASE
        WHEN _type_error IS NOT NULL THEN 'invalid_type:' || _type_error
        WHEN {{key_is_null}} THEN 'invalid_key'
        WHEN {{order_is_null}} THEN 'invalid_order'
        WHEN _op IS NULL OR _op NOT IN ('upsert', 'delete') THEN 'invalid_op'
    END AS reason
FROM raw;
