-- trips per day and zone
SELECT t.day, z.name AS zone, count(*) AS n
FROM {{upstream:trips}} t JOIN {{upstream:zones}} z ON t.zone_id = z.zone_id
GROUP BY ALL;
