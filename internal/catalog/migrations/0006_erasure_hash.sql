-- 0006: idem.erasures keeps no erased value. Its key was the erased value
-- itself (a key, or with subject_columns a subject value) while the
-- erasure journal beside the database keeps only a salted sha256 of it:
-- the value outlived the erasure in the database file, the read replica,
-- checkpoint copies and backups. From now on key is the journal's hash,
-- sha256(salt || value) in lower-case hex, and salt (new) the salt it was
-- taken with: the database's id (idem.commits row 0) where the erasure was
-- made. A scratch database that replays an erasure (a rerun) records the
-- same salt and hash, so every comparison hashes the incoming value with
-- the row's salt. A row a journal replay recorded by its hash alone
-- ('#journal:' || hash) keeps the hash. The old values' bytes stay in the
-- file's free blocks until the next compact (idem erase compacts).
ALTER TABLE idem.erasures ADD COLUMN IF NOT EXISTS salt VARCHAR;
UPDATE idem.erasures SET
    salt = (SELECT db_id FROM idem.commits WHERE seq = 0),
    key = CASE WHEN starts_with(key, '#journal:') THEN substr(key, 10)
               ELSE sha256((SELECT db_id FROM idem.commits WHERE seq = 0) || key) END
WHERE salt IS NULL;
