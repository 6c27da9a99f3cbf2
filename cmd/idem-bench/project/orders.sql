-- Mart: each order with its items summed up and its number among its
-- customer's orders.
WITH items AS (
    SELECT
        order_id,
        sum(supply_cost) AS order_cost,
        sum(product_price) AS order_items_subtotal,
        count(*) AS count_order_items,
        count(*) FILTER (WHERE is_food_item) AS count_food_items,
        count(*) FILTER (WHERE is_drink_item) AS count_drink_items
    FROM {{upstream:order_items}}
    GROUP BY order_id
)
SELECT
    o.order_id,
    o.location_id,
    o.customer_id,
    o.subtotal,
    o.tax_paid,
    o.order_total,
    o.ordered_at,
    o.status,
    coalesce(i.order_cost, 0) AS order_cost,
    coalesce(i.order_items_subtotal, 0) AS order_items_subtotal,
    coalesce(i.count_order_items, 0) AS count_order_items,
    coalesce(i.count_food_items, 0) AS count_food_items,
    coalesce(i.count_drink_items, 0) AS count_drink_items,
    coalesce(i.count_food_items, 0) > 0 AS is_food_order,
    coalesce(i.count_drink_items, 0) > 0 AS is_drink_order,
    row_number() OVER (PARTITION BY o.customer_id ORDER BY o.ordered_at, o.order_id) AS customer_order_number
FROM {{upstream:stg_orders}} AS o
LEFT JOIN items AS i ON i.order_id = o.order_id
