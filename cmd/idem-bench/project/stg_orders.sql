-- Staging: orders renamed, amounts from cents to dollars, the order day.
SELECT
    id AS order_id,
    store_id AS location_id,
    customer_id,
    subtotal AS subtotal_cents,
    tax_paid AS tax_paid_cents,
    order_total AS order_total_cents,
    (subtotal / 100)::DECIMAL(16, 2) AS subtotal,
    (tax_paid / 100)::DECIMAL(16, 2) AS tax_paid,
    (order_total / 100)::DECIMAL(16, 2) AS order_total,
    CAST(ordered_at AS DATE) AS ordered_at,
    status
FROM {{upstream:raw_orders}}
