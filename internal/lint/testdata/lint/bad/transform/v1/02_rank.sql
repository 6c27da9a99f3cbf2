-- Rank: ties on version are broken by chance (L002), the values are
-- collected in arrival order (L004), and a sample is random (L003).
CREATE OR REPLACE TEMP TABLE ranked AS
SELECT
    _row,
    row_number() OVER (PARTITION BY id ORDER BY version DESC) AS pick,
    string_agg(value, ',') OVER (PARTITION BY id) AS all_values,
    random() < 0.5 AS sampled
FROM staged
WHERE reason IS NULL
QUALIFY pick <= getvariable('cap');
