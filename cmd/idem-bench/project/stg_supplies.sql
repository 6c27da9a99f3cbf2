-- Staging: supplies with a surrogate key, the cost in dollars.
SELECT
    md5(CAST(id AS VARCHAR) || '-' || sku) AS supply_uuid,
    id AS supply_id,
    sku AS product_id,
    name AS supply_name,
    (cost / 100)::DECIMAL(16, 2) AS supply_cost,
    perishable AS is_perishable_supply
FROM {{upstream:raw_supplies}}
