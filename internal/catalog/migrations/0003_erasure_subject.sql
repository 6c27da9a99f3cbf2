-- 0003: an erasure by subject. idem erase --subject VALUE removes every
-- row in which one of the job's [privacy] subject columns holds VALUE; its
-- row in idem.erasures names those columns (a JSON array) so that a rerun
-- replays the erasure by the same columns. A row without them (NULL) is an
-- erasure of one value of the pipeline's key, as before: only those guard
-- a later batch against resurrecting the key.
ALTER TABLE idem.erasures ADD COLUMN IF NOT EXISTS subject_columns VARCHAR;
