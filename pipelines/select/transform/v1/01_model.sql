-- The model: the job's SELECT (the text of its v<N>.sql goes where the
-- model placeholder stands), written as the whole target in key order. idem
-- checks the key is unique and never NULL before COMMIT.
CREATE OR REPLACE TABLE {{table}} AS
SELECT * FROM (
{{model}}
) AS idem_model
ORDER BY {{key}};

-- A model has no rejects: each row of its result is staged and accepted,
-- so rows in and outcomes both count the result's rows.
CREATE OR REPLACE TEMP VIEW staged AS
SELECT * FROM {{table}};

CREATE OR REPLACE TEMP VIEW outcomes AS
SELECT 'accepted' AS outcome FROM {{table}};
