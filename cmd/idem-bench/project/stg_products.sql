-- Staging: products renamed, the price in dollars, food and drink flags.
SELECT
    sku AS product_id,
    name AS product_name,
    type AS product_type,
    description AS product_description,
    (price / 100)::DECIMAL(16, 2) AS product_price,
    coalesce(type = 'jaffle', false) AS is_food_item,
    coalesce(type = 'beverage', false) AS is_drink_item
FROM {{upstream:raw_products}}
