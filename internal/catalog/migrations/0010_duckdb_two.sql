-- 0010: idem runs on DuckDB 2.0 (duckdb-go v2.20000.0). The tables do not
-- change; the version does, so that an idem on DuckDB 1.5, which reads
-- catalog versions up to 9, refuses a database an idem on DuckDB 2.0 has
-- written (exit 3, naming both catalog versions) instead of writing it
-- with an engine whose exports and reruns it was not checked against. A
-- database keeps a storage format DuckDB 1.5 reads (a new one is created
-- with storage_compatibility_version v1.5.0, run.Open), so that the
-- refusal is idem's and not an error of the engine.
SELECT 1;
