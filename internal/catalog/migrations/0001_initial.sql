-- 0001: idem's own tables as every idem before catalog versions created
-- them (release e77bdc9). It runs on a new database and on a database of
-- that era (no catalog_version row in idem.meta), which may predate some
-- of these tables: every statement is one that such a database takes as
-- it is, adding only what it lacks.

-- A database from before idem.owners gets its owners claimed below, once.
SET VARIABLE idem_had_owners = (SELECT count(*) > 0 FROM duckdb_tables()
    WHERE database_name = current_database() AND schema_name = 'idem' AND table_name = 'owners');

CREATE SCHEMA IF NOT EXISTS idem;
CREATE TABLE IF NOT EXISTS idem.meta (key VARCHAR NOT NULL, value VARCHAR);
CREATE TABLE IF NOT EXISTS idem.jobs (
    job         VARCHAR NOT NULL,
    pipeline    VARCHAR,
    mode        VARCHAR,
    target      VARCHAR,
    job_key     VARCHAR,
    parts       VARCHAR,
    snapshot    BIGINT NOT NULL DEFAULT 0,
    cursor      BIGINT NOT NULL DEFAULT 0,
    epoch       BIGINT NOT NULL DEFAULT 1,
    updated_at  TIMESTAMP
);
CREATE TABLE IF NOT EXISTS idem.released (
    pipeline    VARCHAR NOT NULL,
    kind        VARCHAR NOT NULL,
    version     INTEGER NOT NULL,
    sha256      VARCHAR NOT NULL,
    recorded_at TIMESTAMP
);
CREATE TABLE IF NOT EXISTS idem.ledger (
    job          VARCHAR NOT NULL,
    batch_id     VARCHAR NOT NULL,
    digest       VARCHAR NOT NULL,
    input_digest VARCHAR NOT NULL,
    from_pos     BIGINT,
    to_pos       BIGINT,
    rows_in      BIGINT NOT NULL,
    outcomes     VARCHAR NOT NULL,
    snapshot     BIGINT NOT NULL,
    committed_at TIMESTAMP
);
CREATE TABLE IF NOT EXISTS idem.snapshots (
    job          VARCHAR NOT NULL,
    snapshot     BIGINT NOT NULL,
    parent       BIGINT NOT NULL,
    kind         VARCHAR NOT NULL,
    batch_id     VARCHAR,
    job_key      VARCHAR,
    parts        VARCHAR,
    inputs       VARCHAR,
    rows_in      BIGINT,
    rows_out     BIGINT,
    outcomes     VARCHAR,
    columns      VARCHAR,
    key_columns  VARCHAR,
    committed_at TIMESTAMP
);
CREATE TABLE IF NOT EXISTS idem.runs (
    job       VARCHAR NOT NULL,
    run_at    TIMESTAMP NOT NULL,
    batch_id  VARCHAR,
    decision  VARCHAR NOT NULL,
    changed   VARCHAR,
    rows_in   BIGINT,
    outcomes  VARCHAR,
    snapshot  BIGINT,
    cursor    BIGINT,
    epoch     BIGINT,
    message   VARCHAR
);
CREATE TABLE IF NOT EXISTS idem.inputs (
    sha256     VARCHAR NOT NULL,
    bytes      BIGINT NOT NULL,
    stored_at  TIMESTAMP
);
CREATE TABLE IF NOT EXISTS idem.files (
    job          VARCHAR NOT NULL,
    path         VARCHAR NOT NULL,
    sha256       VARCHAR NOT NULL,
    bytes        BIGINT NOT NULL,
    batch_id     VARCHAR NOT NULL,
    snapshot     BIGINT NOT NULL,
    committed_at TIMESTAMP
);
CREATE TABLE IF NOT EXISTS idem.commits (
    db_id        VARCHAR NOT NULL,
    seq          BIGINT NOT NULL,
    job          VARCHAR,
    kind         VARCHAR NOT NULL,
    committed_at TIMESTAMP
);
CREATE TABLE IF NOT EXISTS idem.owners (
    name       VARCHAR NOT NULL,
    job        VARCHAR NOT NULL,
    claimed_at TIMESTAMP
);
CREATE TABLE IF NOT EXISTS idem.packets (
    job         VARCHAR NOT NULL,
    snapshot    BIGINT NOT NULL,
    packet      VARCHAR NOT NULL,
    recorded_at TIMESTAMP
);
CREATE TABLE IF NOT EXISTS idem.retention (
    job          VARCHAR NOT NULL,
    oldest_kept  BIGINT NOT NULL,
    inputs_from  BIGINT NOT NULL,
    expired_at   TIMESTAMP
);
CREATE TABLE IF NOT EXISTS idem.positions (
    job        VARCHAR NOT NULL,
    partition  VARCHAR NOT NULL,
    next       BIGINT NOT NULL,
    snapshot   BIGINT NOT NULL,
    updated_at TIMESTAMP
);
CREATE TABLE IF NOT EXISTS idem.erasures (
    job        VARCHAR NOT NULL,
    key        VARCHAR NOT NULL,
    position   BIGINT,
    snapshot   BIGINT,
    erased_at  TIMESTAMP
);
CREATE TABLE IF NOT EXISTS idem.checkpoints (
    job        VARCHAR NOT NULL,
    snapshot   BIGINT NOT NULL,
    sha256     VARCHAR NOT NULL,
    bytes      BIGINT NOT NULL,
    files      VARCHAR NOT NULL,
    created_at TIMESTAMP
);

-- Row 0 of idem.commits holds the database's own id (catalog.RecordCommit):
-- 32 hex digits, random.
INSERT INTO idem.commits (db_id, seq, job, kind, committed_at)
SELECT md5(gen_random_uuid()::VARCHAR), 0, NULL, 'created', current_timestamp
WHERE NOT EXISTS (SELECT 1 FROM idem.commits);

-- A database from before idem.owners: its jobs claim their names, each
-- target and history, and the _outcomes, _active and _tombstones objects
-- beside a target. Where two jobs already wrote one table, the job that
-- committed first keeps it.
INSERT INTO idem.owners (name, job, claimed_at)
SELECT name, arg_min(job, (first, job)), current_timestamp FROM (
    SELECT lower('main.' || j.target) AS name, j.job,
           coalesce((SELECT min(committed_at) FROM idem.snapshots s WHERE s.job = j.job), TIMESTAMP '9999-12-31') AS first
    FROM idem.jobs j WHERE coalesce(j.target, '') <> ''
    UNION ALL
    SELECT lower('idem.' || j.job || '__history'), j.job,
           coalesce((SELECT min(committed_at) FROM idem.snapshots s WHERE s.job = j.job), TIMESTAMP '9999-12-31')
    FROM idem.jobs j WHERE j.snapshot > 0
) AS c
WHERE name NOT IN (SELECT name FROM idem.owners) AND NOT getvariable('idem_had_owners')
GROUP BY name;
INSERT INTO idem.owners (name, job, claimed_at)
SELECT name, arg_min(job, job), current_timestamp FROM (
    SELECT lower('main.' || o.table_name) AS name, c.job
    FROM (SELECT table_name FROM duckdb_tables() WHERE database_name = current_database() AND schema_name = 'main'
          UNION ALL
          SELECT view_name FROM duckdb_views() WHERE database_name = current_database() AND schema_name = 'main' AND NOT internal) AS o
    JOIN idem.owners c ON c.name LIKE 'main.%'
     AND lower(o.table_name) IN (substr(c.name, 6) || '_outcomes', substr(c.name, 6) || '_active', substr(c.name, 6) || '_tombstones')
) AS x
WHERE name NOT IN (SELECT name FROM idem.owners) AND NOT getvariable('idem_had_owners')
GROUP BY name;

RESET VARIABLE idem_had_owners;
