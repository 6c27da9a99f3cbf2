-- 0007: a placeholder of branch wt-duck2, which took 0010 for the move to
-- DuckDB 2.0 while other branches write 0006-0009. It changes nothing.
-- When the branch holding the real 0007 is merged, delete this file (two
-- files of one version are refused: ErrDuplicateVersion).
SELECT 1;
