-- Append without ORDER BY (L004 warning) and export without ORDER BY
-- (L004 error).
INSERT INTO {{table}} (id, value)
SELECT id, value FROM outcomes WHERE outcome = 'accepted';

COPY (SELECT * FROM outcomes) TO '/dev/null' (FORMAT csv);
