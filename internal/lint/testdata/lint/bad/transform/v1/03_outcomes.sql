CREATE OR REPLACE TEMP TABLE outcomes AS
SELECT s._row, s.id, s.value,
       CASE WHEN r._row IS NULL THEN 'dropped' ELSE 'accepted' END AS outcome
FROM staged AS s
LEFT JOIN ranked AS r ON r._row = s._row;
