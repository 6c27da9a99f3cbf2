-- One SELECT. Read each job listed in [input] upstream as below, with
-- {{upstream:__NAME___source}}, and params with getvariable('name'). The
-- result's columns are the target's; [target] key names one row.
SELECT category, count(*) AS items, sum(amount) AS amount
FROM {{upstream:__NAME___source}}
WHERE idem_status = 'active'
GROUP BY category
