-- Mart: orders, revenue and cost per month and location, returns left out.
SELECT
    date_trunc('month', o.ordered_at) AS month,
    l.location_name,
    count(*) AS orders,
    sum(o.order_total) AS revenue,
    sum(o.order_cost) AS cost
FROM {{upstream:orders}} AS o
JOIN {{upstream:stg_locations}} AS l ON l.location_id = o.location_id
WHERE o.status <> 'returned'
GROUP BY date_trunc('month', o.ordered_at), l.location_name
