-- Commit: a refresh replaces the target, so this step clears it first;
-- idem does not. Without the DELETE a reload would add to the old rows.
DELETE FROM {{table}};

INSERT INTO {{table}} (id, name, score)
SELECT id, name, score
FROM outcomes
WHERE outcome = 'accepted'
ORDER BY id;

DELETE FROM {{table:_outcomes}};

INSERT INTO {{table:_outcomes}} (id, name, score, outcome)
SELECT raw_id, raw_name, raw_score, outcome
FROM outcomes
ORDER BY _row;
