-- Outcomes: exactly one per input row.
CREATE OR REPLACE TEMP TABLE outcomes AS
SELECT
    s._row, s.id, s.name, s.score, s.raw_id, s.raw_name, s.raw_score,
    CASE
        WHEN s.reason IS NOT NULL THEN s.reason
        WHEN r.id_rank > 1 THEN 'repeated_id'
        WHEN s.score < getvariable('min_score') THEN 'below_min_score'
        ELSE 'accepted'
    END AS outcome
FROM staged AS s
LEFT JOIN ranked AS r ON r._row = s._row;
