-- 0008: every migration a database took is recorded with the sha256 of
-- its file, so that a database migrated by a build of idem whose embedded
-- migrations differ from this one's (a migration edited after release) is
-- refused by name rather than read as if it held the tables this idem's
-- files make. A database migrated before this step records the sha256 of
-- this idem's files for the migrations it had taken (catalog.Migrate
-- writes the rows, from the embedded files, after every step it applies).
CREATE TABLE idem.migrations (
    version    INTEGER NOT NULL,
    file       VARCHAR NOT NULL,
    sha256     VARCHAR NOT NULL,
    applied_at TIMESTAMP,
    UNIQUE (version)
);
