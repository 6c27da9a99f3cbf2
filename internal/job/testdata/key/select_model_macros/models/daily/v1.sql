-- trips per day and zone
SELECT t.day, zone_label(z.name) AS zone, count(*) AS n
FROM {{ ref('trips') }} t JOIN {{upstream:zones}} z ON t.zone_id = z.zone_id
GROUP BY ALL;
