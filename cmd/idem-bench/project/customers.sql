-- Mart: each customer with lifetime figures over their orders.
WITH summary AS (
    SELECT
        customer_id,
        count(*) AS count_lifetime_orders,
        min(ordered_at) AS first_ordered_at,
        max(ordered_at) AS last_ordered_at,
        sum(subtotal) AS lifetime_spend_pretax,
        sum(tax_paid) AS lifetime_tax_paid,
        sum(order_total) AS lifetime_spend
    FROM {{upstream:orders}}
    GROUP BY customer_id
)
SELECT
    c.customer_id,
    c.customer_name,
    coalesce(s.count_lifetime_orders, 0) AS count_lifetime_orders,
    s.first_ordered_at,
    s.last_ordered_at,
    coalesce(s.lifetime_spend_pretax, 0) AS lifetime_spend_pretax,
    coalesce(s.lifetime_tax_paid, 0) AS lifetime_tax_paid,
    coalesce(s.lifetime_spend, 0) AS lifetime_spend,
    CASE WHEN s.count_lifetime_orders > 1 THEN 'returning' ELSE 'new' END AS customer_type
FROM {{upstream:stg_customers}} AS c
LEFT JOIN summary AS s ON s.customer_id = c.customer_id
