-- The floor of a refresh of the sample pipeline (transform v2, schema v2):
-- the same typing rules, ranking, outcome rows, target rows, history and
-- snapshot, state and run-log rows as `idem run`, written by hand as one
-- script in one transaction. Not included (idem-only work): the input's
-- sha256, the retained copy, the job-key and released-SQL checks, the CSV
-- header check, the balance check. History is brought up to date by key
-- (the target's primary key), where idem compares whole rows.
-- Variables set by the bench: input, job.
SET VARIABLE snap = (SELECT snapshot + 1 FROM idem.jobs WHERE job = getvariable('job'));
SET VARIABLE licenses = ['CC0 1.0', 'CC BY 4.0'];

CREATE TEMP TABLE staged AS
WITH typed AS (
    SELECT
        row_number() OVER () AS _row,
        id AS raw_id, species_id AS raw_species_id, year AS raw_year, license AS raw_license,
        CASE WHEN regexp_full_match(trim(id), '-?[0-9]+') THEN TRY_CAST(trim(id) AS BIGINT) END AS id,
        CASE WHEN regexp_full_match(trim(species_id), '-?[0-9]+') THEN TRY_CAST(trim(species_id) AS BIGINT) END AS species_id,
        CASE WHEN regexp_full_match(trim(year), '-?[0-9]+') THEN TRY_CAST(trim(year) AS INTEGER) END AS year,
        nullif(trim(license), '') AS license
    FROM read_csv(getvariable('input'), header = true, auto_detect = false, delim = ',', quote = '"', escape = '"', strict_mode = true, allow_quoted_nulls = false,
                  columns = {'id': 'VARCHAR', 'species_id': 'VARCHAR', 'year': 'VARCHAR', 'license': 'VARCHAR'})
)
SELECT *,
    CASE
        WHEN id IS NULL THEN 'invalid_id'
        WHEN species_id IS NULL THEN 'invalid_species_id'
        WHEN nullif(trim(raw_year), '') IS NOT NULL AND year IS NULL THEN 'invalid_year'
        WHEN license IS NULL THEN 'invalid_license'
    END AS reason
FROM typed;

CREATE TEMP TABLE outcomes AS
WITH valid AS (
    SELECT _row, id, species_id, license,
           row_number() OVER (PARTITION BY id ORDER BY species_id, year NULLS FIRST, license, _row) AS id_rank
    FROM staged WHERE reason IS NULL AND year IS NOT NULL
), picked AS (
    SELECT _row, row_number() OVER (PARTITION BY species_id ORDER BY md5(CAST(id AS VARCHAR)), id) AS pick
    FROM valid WHERE id_rank = 1 AND list_contains(getvariable('licenses'), license)
)
SELECT s.*,
    CASE
        WHEN s.reason IS NOT NULL THEN s.reason
        WHEN s.year IS NULL THEN 'missing_year'
        WHEN v.id_rank > 1 THEN 'repeated_id'
        WHEN NOT list_contains(getvariable('licenses'), s.license) THEN 'license_excluded'
        WHEN p.pick > 1000 THEN 'over_cap'
        ELSE 'accepted'
    END AS outcome
FROM staged AS s LEFT JOIN valid AS v ON v._row = s._row LEFT JOIN picked AS p ON p._row = s._row;

DELETE FROM occurrence_sample;
INSERT INTO occurrence_sample (id, species_id, year, license)
SELECT id, species_id, year, license FROM outcomes WHERE outcome = 'accepted' ORDER BY id;
DELETE FROM occurrence_sample_outcomes;
INSERT INTO occurrence_sample_outcomes (id, species_id, year, license, outcome)
SELECT raw_id, raw_species_id, raw_year, raw_license, outcome FROM outcomes ORDER BY _row;

-- History by key: close open rows whose id left the target or whose values
-- changed, open the target rows for those ids.
CREATE TEMP TABLE changed AS
SELECT coalesce(h.id, t.id) AS id
FROM (SELECT * FROM idem.bench_sample__history WHERE idem_to IS NULL) AS h
FULL JOIN occurrence_sample AS t ON h.id = t.id
WHERE h.id IS NULL OR t.id IS NULL
   OR h.species_id IS DISTINCT FROM t.species_id OR h.year IS DISTINCT FROM t.year OR h.license IS DISTINCT FROM t.license;

UPDATE idem.bench_sample__history AS h SET idem_to = getvariable('snap')
FROM changed AS c WHERE h.idem_to IS NULL AND h.id = c.id;

INSERT INTO idem.bench_sample__history (id, species_id, year, license, idem_from, idem_to)
SELECT t.id, t.species_id, t.year, t.license, getvariable('snap'), NULL
FROM occurrence_sample AS t JOIN changed AS c ON c.id = t.id;

-- Bookkeeping rows.
SET VARIABLE counts = (
    SELECT to_json(map(list(outcome ORDER BY outcome), list(n ORDER BY outcome)))::VARCHAR
    FROM (SELECT outcome, count(*) AS n FROM outcomes GROUP BY outcome));
SET VARIABLE rows_in = (SELECT count(*) FROM staged);
INSERT INTO idem.snapshots (job, snapshot, parent, kind, batch_id, job_key, parts, inputs, rows_in, rows_out,
    outcomes, columns, key_columns, packet, committed_at)
VALUES (getvariable('job'), getvariable('snap'), getvariable('snap') - 1, 'loaded',
    NULL, 'floor', '{}', '{}', getvariable('rows_in'), (SELECT count(*) FROM occurrence_sample),
    getvariable('counts'), '[]', '["id"]', NULL, current_timestamp);
UPDATE idem.jobs SET snapshot = getvariable('snap'), job_key = 'floor', updated_at = current_timestamp WHERE job = getvariable('job');
-- The run log row is the commit log's (catalog version 9), as idem's.
INSERT INTO idem.runs (job, run_at, batch_id, decision, changed, rows_in, outcomes, snapshot, cursor, epoch, message, seq, db_id)
VALUES (getvariable('job'), current_timestamp, NULL, 'loaded', '[]',
    getvariable('rows_in'), getvariable('counts'), getvariable('snap'), 0, 1, NULL,
    (SELECT max(seq) FROM idem.commits) + 1, (SELECT value FROM idem.meta WHERE key = 'db_id'));
