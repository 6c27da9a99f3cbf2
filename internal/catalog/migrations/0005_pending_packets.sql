-- 0005: a release packet's whole-target entry (a job without partition_by)
-- is committed without its sha256, bytes and distinct keys, which idem
-- show computes from the snapshot's pinned rows when asked (README, "The
-- release packet"). The tables do not change; the version does, so that
-- an idem of catalog version 4, which would print such an entry's sha256
-- as empty, refuses this database (exit 2, naming both versions) instead.
SELECT 1;
