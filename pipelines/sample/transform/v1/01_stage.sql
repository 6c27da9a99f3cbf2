-- Stage: type the raw input (read as text) and tag every invalid row with the
-- first rule it fails. An empty year is NULL, not an error.
CREATE OR REPLACE TEMP TABLE staged AS
WITH raw AS (
    SELECT
        row_number() OVER () AS _row,
        CAST(id AS VARCHAR)         AS raw_id,
        CAST(species_id AS VARCHAR) AS raw_species_id,
        CAST(year AS VARCHAR)       AS raw_year,
        CAST(license AS VARCHAR)    AS raw_license
    FROM input
), typed AS (
    SELECT
        *,
        CASE WHEN regexp_full_match(trim(raw_id), '-?[0-9]+') THEN TRY_CAST(trim(raw_id) AS BIGINT) END AS id,
        CASE WHEN regexp_full_match(trim(raw_species_id), '-?[0-9]+') THEN TRY_CAST(trim(raw_species_id) AS BIGINT) END AS species_id,
        CASE WHEN regexp_full_match(trim(raw_year), '-?[0-9]+') THEN TRY_CAST(trim(raw_year) AS INTEGER) END AS year,
        nullif(trim(raw_license), '') AS license
    FROM raw
)
SELECT
    *,
    CASE
        WHEN id IS NULL THEN 'invalid_id'
        WHEN species_id IS NULL THEN 'invalid_species_id'
        WHEN nullif(trim(raw_year), '') IS NOT NULL AND year IS NULL THEN 'invalid_year'
        WHEN license IS NULL THEN 'invalid_license'
    END AS reason
FROM typed;
