-- Commit: the target holds exactly the accepted rows of this input.
DELETE FROM {{table}};

INSERT INTO {{table}} (id, species_id, year, license)
SELECT id, species_id, year, license
FROM outcomes
WHERE outcome = 'accepted'
ORDER BY id;

DELETE FROM {{table:_outcomes}};

INSERT INTO {{table:_outcomes}} (id, species_id, year, license, outcome)
SELECT raw_id, raw_species_id, raw_year, raw_license, outcome
FROM outcomes
ORDER BY _row;
