package run

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/idem-dev/idem/internal/job"
	"github.com/stretchr/testify/require"
)

// TestBigNewTableCheckpointed: a commit that created a table holding more
// than a row group's rows is checkpointed at once (checkpointNow), and one
// that created a small table is left in the WAL. DuckDB 2.0.0 on more than
// one thread reads no row of a table created empty (CREATE TABLE AS ...
// LIMIT 0, as merge_by_key v2's tombstones are) and filled past a row group
// in the same transaction, in later transactions until a checkpoint: the
// rows the table holds are read whole after the commit.
func TestBigNewTableCheckpointed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d, err := Open(ctx, filepath.Join(t.TempDir(), "idem.duckdb"), OpenOptions{DuckDB: job.DuckDBSettings{Threads: 2}})
	require.NoError(t, err)
	t.Cleanup(func() { d.Close() })
	conn, err := d.sql.Conn(ctx)
	require.NoError(t, err)
	defer conn.Close()
	commit := func(stmts ...string) bool {
		t.Helper()
		tx, err := conn.BeginTx(ctx, nil)
		require.NoError(t, err)
		for _, s := range stmts {
			_, err := tx.ExecContext(ctx, s)
			require.NoError(t, err, s)
		}
		require.NoError(t, tx.Commit())
		now := d.checkpointNow(ctx, conn)
		if now {
			_, err := conn.ExecContext(ctx, "CHECKPOINT")
			require.NoError(t, err)
			d.settled(ctx, conn)
		}
		return now
	}
	require.False(t, commit(`CREATE TABLE small AS SELECT range AS id FROM range(10) LIMIT 0`, `INSERT INTO small SELECT range FROM range(1000)`),
		"a small new table left in the WAL")
	require.True(t, commit(`CREATE TABLE src AS SELECT range AS id, 'v' || range AS v FROM range(130000)`), "a big table created whole")
	require.True(t, commit(`CREATE TABLE big AS SELECT * FROM src LIMIT 0`, `INSERT INTO big SELECT * FROM src`),
		"a new table past a row group checkpointed at once")
	var n int64
	require.NoError(t, conn.QueryRowContext(ctx, `SELECT count(*) FROM (SELECT id FROM big GROUP BY id)`).Scan(&n))
	require.Equal(t, int64(130000), n, "the new table's rows read whole after its commit")
	require.False(t, commit(`INSERT INTO small SELECT range FROM range(5)`), "a commit that created no table")
	// A table an earlier commit created (a follower's outcomes table)
	// that a later commit fills past a row group: that commit created no
	// table and stays in the WAL, and the rows are all read.
	require.False(t, commit(`CREATE TABLE later AS SELECT * FROM src LIMIT 0`), "an empty new table")
	require.False(t, commit(`INSERT INTO later SELECT * FROM src`), "a table an earlier commit created, filled past a row group")
	require.NoError(t, conn.QueryRowContext(ctx, `SELECT count(*) FROM (SELECT id FROM later GROUP BY id)`).Scan(&n))
	require.Equal(t, int64(130000), n, "the rows of a table filled in a later commit read whole")
}
