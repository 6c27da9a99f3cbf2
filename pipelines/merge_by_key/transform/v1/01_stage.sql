-- Stage: every input row with its values as received (_raw), typed to the
-- declared types, its ordering value (_ord; NULL without an ordering
-- column) and the first check it fails: a value that does not cast to its
-- column's type, a NULL key column, a NULL ordering value. Quality rules
-- are applied by the runner right after this step.
CREATE OR REPLACE TEMP TABLE staged AS
WITH raw AS (
    SELECT
        row_number() OVER () AS _row,
        {{raw_struct}} AS _raw,
        {{type_error}} AS _type_error,
        {{typed_columns}}
    FROM input
)
SELECT
    _row,
    _raw,
    {{columns}},
    {{order}} AS _ord,
    CASE
        WHEN _type_error IS NOT NULL THEN 'invalid_type:' || _type_error
        WHEN {{key_is_null}} THEN 'invalid_key'
        WHEN {{order_is_null}} THEN 'invalid_order'
    END AS reason
FROM raw;
