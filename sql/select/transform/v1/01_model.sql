-- The model: the job's SELECT ({{model}} is the text of its v<N>.sql),
-- written as the whole target in key order. idem checks the key is unique
-- and never NULL before COMMIT.
CREATE OR REPLACE TABLE {{table}} AS
SELECT * FROM (
{{model}}
) AS idem_model
ORDER BY {{key}};

-- Every row of the result is an accepted row: a model has no rejects.
CREATE OR REPLACE TEMP VIEW outcomes AS
SELECT 'accepted' AS outcome FROM {{table}};
