-- Staging: stores as locations, the opening day.
SELECT id AS location_id, name AS location_name, tax_rate, CAST(opened_at AS DATE) AS opened_date
FROM {{upstream:raw_stores}}
