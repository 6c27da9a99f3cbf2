-- Mart: per cohort (month of a customer's first order) and month, the
-- customers who ordered and what they spent.
WITH firsts AS (
    SELECT customer_id, date_trunc('month', first_ordered_at) AS cohort
    FROM {{upstream:customers}}
    WHERE first_ordered_at IS NOT NULL
)
SELECT
    f.cohort,
    date_trunc('month', o.ordered_at) AS month,
    count(DISTINCT o.customer_id) AS active_customers,
    sum(o.order_total) AS revenue
FROM {{upstream:orders}} AS o
JOIN firsts AS f ON f.customer_id = o.customer_id
GROUP BY f.cohort, date_trunc('month', o.ordered_at)
