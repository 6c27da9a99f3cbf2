package catalog

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
)

// Committed15 says which snapshots an idem on DuckDB 1.5 committed: all of
// a database not yet at catalog version 7, else those up to the one
// migration 0007 recorded for the job.
func TestCommitted15(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := newCatalog(t)
	old, err := Committed15(ctx, db, "j", 1)
	require.NoError(t, err)
	require.False(t, old, "a database made on DuckDB 2.0")

	exec(t, db, `INSERT INTO idem.meta VALUES ('duckdb15_last:j', '3')`)
	for s, want := range map[int64]bool{1: true, 3: true, 4: false} {
		old, err := Committed15(ctx, db, "j", s)
		require.NoError(t, err)
		require.Equal(t, want, old, "snapshot %d", s)
	}
	old, err = Committed15(ctx, db, "other", 1)
	require.NoError(t, err)
	require.False(t, old)

	exec(t, db, `UPDATE idem.meta SET value = '5' WHERE key = 'catalog_version'`)
	old, err = Committed15(ctx, db, "other", 9)
	require.NoError(t, err)
	require.True(t, old, "a database an idem on DuckDB 2.0 has not migrated yet")
}

// UnsignedZeroCSVQuery writes -0.0 as 0.0 in DOUBLE and REAL columns and
// leaves every other value, and column, as CanonicalCSVQuery writes it.
func TestUnsignedZeroCSVQuery(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := openMemory(t)
	src := `SELECT * FROM (VALUES (1, '-0.0'::DOUBLE, '-0.0'::REAL, -1.5::DOUBLE, 'NaN'::DOUBLE, NULL::DOUBLE, '-0.0', ['a', '']::VARCHAR[2])) t(id, d, r, neg, nan, nul, txt, arr)`
	q, err := UnsignedZeroCSVQuery(ctx, db, src)
	require.NoError(t, err)
	require.Equal(t, []string{"1|0.0|0.0|-1.5|nan|∅|-0.0|[a, ]"}, rows(t, db,
		`SELECT id || '|' || CAST(d AS VARCHAR) || '|' || CAST(r AS VARCHAR) || '|' || CAST(neg AS VARCHAR) || '|' || CAST(nan AS VARCHAR) || '|' || coalesce(CAST(nul AS VARCHAR), '∅') || '|' || txt || '|' || arr FROM (`+q+`)`))
	q, err = CanonicalCSVQuery(ctx, db, src)
	require.NoError(t, err)
	require.Equal(t, []string{"-0.0"}, rows(t, db, `SELECT CAST(d AS VARCHAR) FROM (`+q+`)`))
}
