-- Trips with a positive fare, named by their pickup zone. Conflicting
-- versions of a trip (idem_status = 'conflict') are left out.
SELECT t.trip_id, t.pickup_day, z.zone, z.borough, t.fare
FROM {{upstream:trips}} AS t
JOIN {{upstream:zones}} AS z ON z.zone_id = t.zone_id
WHERE t.idem_status = 'active' AND z.idem_status = 'active' AND t.fare > 0
