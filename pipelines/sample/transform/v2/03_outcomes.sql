-- Outcomes: exactly one per input row. Version 2 drops rows without a year.
CREATE OR REPLACE TEMP TABLE outcomes AS
SELECT
    s._row, s.id, s.species_id, s.year, s.license,
    s.raw_id, s.raw_species_id, s.raw_year, s.raw_license,
    CASE
        WHEN s.reason IS NOT NULL THEN s.reason
        WHEN s.year IS NULL THEN 'missing_year'
        WHEN d._row IS NOT NULL THEN 'repeated_id'
        WHEN NOT list_contains(getvariable('licenses'), s.license) THEN 'license_excluded'
        WHEN r.pick > getvariable('cap') THEN 'over_cap'
        ELSE 'accepted'
    END AS outcome
FROM staged AS s
LEFT JOIN ranked AS r ON r._row = s._row
LEFT JOIN repeated AS d ON d._row = s._row;
