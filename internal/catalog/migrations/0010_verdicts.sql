-- 0010: guard verdicts kept across processes (issue 44). A run's guards
-- whose answer is a function of content (the seal check of a job's SQL,
-- DuckDB's EXPLAIN of a step statement, the owner and released-SQL checks
-- a committed run passed) were kept per open handle only, so every new
-- process (a nightly run, a no-op run) computed them again. A committing
-- run now writes the verdicts it learned here, in its own transaction.
--
-- key is the hex sha256 of the engine's version, the verdict's kind and
-- everything it depends on (run.guardKey); value what a hit needs (the
-- names the seal leaves to the database, a plan's root); mac an
-- HMAC-SHA256 of the database's id, key, kind and value under a secret
-- kept in a file beside the database, not in it (run/verdicts.go): a row
-- written without that secret, or changed, is not trusted, and a row
-- copied from another database does not match this one's id. IF NOT
-- EXISTS: a database that lost its version row takes every migration again.
CREATE TABLE IF NOT EXISTS idem.verdicts (
    key   VARCHAR NOT NULL,
    kind  VARCHAR NOT NULL,
    value VARCHAR NOT NULL,
    mac   VARCHAR NOT NULL
);
