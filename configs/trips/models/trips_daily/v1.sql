-- Per pickup day and zone: clean trips and the sum of their fares.
SELECT pickup_day, zone, count(*) AS trips, sum(fare) AS fares
FROM {{upstream:trips_clean}}
GROUP BY pickup_day, zone
