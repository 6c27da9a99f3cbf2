-- Outcomes: one per input row, from its stage reason or its entity's
-- decision. A view, not a table: the commit step's insert and idem's count
-- each read it once, which costs less than materializing one row per input
-- row.
CREATE OR REPLACE TEMP VIEW outcomes AS
SELECT
    s._row, s.change_id, s.entity_id, s.raw_version, s.operation, s.value,
    CASE
        WHEN s.reason IS NOT NULL THEN s.reason
        WHEN s.version < d.version THEN 'superseded_in_batch'
        ELSE d.decision
    END AS outcome
FROM staged AS s
LEFT JOIN decisions AS d ON d.entity_id = s.entity_id;
