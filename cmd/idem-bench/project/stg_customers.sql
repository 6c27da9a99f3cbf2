-- Staging: one row per customer, renamed.
SELECT id AS customer_id, name AS customer_name
FROM {{upstream:raw_customers}}
