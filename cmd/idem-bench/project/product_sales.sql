-- Mart: units and revenue per product, numbered by revenue.
SELECT
    product_id,
    product_name,
    count(*) AS units,
    sum(product_price) AS revenue,
    row_number() OVER (ORDER BY sum(product_price) DESC, product_id) AS revenue_rank
FROM {{upstream:order_items}}
GROUP BY product_id, product_name
