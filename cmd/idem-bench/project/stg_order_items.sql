-- Staging: order items renamed.
SELECT id AS order_item_id, order_id, sku AS product_id
FROM {{upstream:raw_items}}
