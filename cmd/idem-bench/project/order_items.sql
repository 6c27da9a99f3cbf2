-- Mart: each order item with its product, price, supply cost and its
-- number within the order.
WITH supply_costs AS (
    SELECT product_id, sum(supply_cost) AS supply_cost
    FROM {{upstream:stg_supplies}}
    GROUP BY product_id
)
SELECT
    oi.order_item_id,
    oi.order_id,
    oi.product_id,
    o.ordered_at,
    p.product_name,
    p.product_price,
    p.is_food_item,
    p.is_drink_item,
    s.supply_cost,
    row_number() OVER (PARTITION BY oi.order_id ORDER BY oi.order_item_id) AS item_number
FROM {{upstream:stg_order_items}} AS oi
JOIN {{upstream:stg_orders}} AS o ON o.order_id = oi.order_id
JOIN {{upstream:stg_products}} AS p ON p.product_id = oi.product_id
LEFT JOIN supply_costs AS s ON s.product_id = oi.product_id
