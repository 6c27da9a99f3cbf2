-- Mart: orders and revenue per location and day.
SELECT
    location_id,
    ordered_at AS day,
    count(*) AS orders,
    count(*) FILTER (WHERE is_food_order) AS food_orders,
    sum(order_total) AS revenue
FROM {{upstream:orders}}
GROUP BY location_id, ordered_at
