-- Rank: one row per id, the highest score first; the order is total (it
-- ends on the row number), so a tie never depends on chance.
CREATE OR REPLACE TEMP TABLE ranked AS
SELECT
    _row,
    row_number() OVER (PARTITION BY id ORDER BY score DESC, name, _row) AS id_rank
FROM staged
WHERE reason IS NULL;
