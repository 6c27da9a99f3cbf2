-- Mart: customers numbered by lifetime spend, overall and within their
-- type (ties broken by the customer id).
SELECT
    customer_id,
    customer_type,
    lifetime_spend,
    row_number() OVER (ORDER BY lifetime_spend DESC, customer_id) AS spend_rank,
    row_number() OVER (PARTITION BY customer_type ORDER BY lifetime_spend DESC, customer_id) AS spend_rank_in_type
FROM {{upstream:customers}}
