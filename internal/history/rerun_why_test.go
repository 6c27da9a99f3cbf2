package history_test

import (
	"context"
	"os"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idem-dev/idem/internal/catalog"
	"github.com/idem-dev/idem/internal/diff"
	"github.com/idem-dev/idem/internal/history"
	"github.com/idem-dev/idem/internal/run"
	"github.com/idem-dev/idem/internal/source"
)

// TestRerunSaysWhy: a snapshot whose stored rows differ from what its
// inputs rebuild is not reproduced, and the result says why: the changed
// key, each column that differs with the stored and the rebuilt value (and
// by how much for a number), and a file beside the database that keeps
// the rebuilt rows, whose sha256 is the rebuilt one. An erasure removes
// that file with the rest of the job's copies.
func TestRerunSaysWhy(t *testing.T) {
	t.Parallel()
	c := checkpointChain(t, 7)
	key := c.query(`SELECT min(entity_id) FROM cs`)[0]
	version := c.query(`SELECT source_version FROM cs WHERE entity_id = ?`, key)[0]
	value := c.query(`SELECT value FROM cs WHERE entity_id = ?`, key)[0]
	// The stored rows of snapshot 7, the latest: the target and history.
	c.open(false, func(d *run.DB) {
		for _, table := range []string{"cs", catalog.HistoryTable("cs")} {
			_, err := d.SQL().ExecContext(context.Background(), `UPDATE `+table+
				` SET value = 'tampered', source_version = source_version + 1000 WHERE entity_id = ?`, key)
			require.NoError(t, err)
		}
	})

	res, err := c.rerunErr(history.RerunOptions{Snapshot: 7})
	require.NoError(t, err)
	require.False(t, res.Reproduced)
	require.NotNil(t, res.Diff)
	require.Equal(t, int64(1), res.Diff.Changed)
	require.Equal(t, []string{key}, res.Diff.ChangedKeys)
	v, err := strconv.ParseInt(version, 10, 64)
	require.NoError(t, err)
	stored, rebuilt, delta := strconv.FormatInt(v+1000, 10), version, -1000.0
	tampered := "tampered"
	require.Equal(t, []diff.RowDifference{{Key: key, Columns: []diff.ColumnDifference{
		{Column: "source_version", From: &stored, To: &rebuilt, Delta: &delta},
		{Column: "value", From: &tampered, To: &value},
	}}}, res.Diff.ChangedRows)

	require.Equal(t, history.RerunKeptPath(c.db, "cs", 7), res.RebuiltPath)
	sum, _, err := source.FileSHA256(res.RebuiltPath)
	require.NoError(t, err)
	require.Equal(t, res.Rebuilt, sum, "the kept file is the rebuilt export")

	// The erasure removes the kept rows.
	c.erase(key)
	require.NoFileExists(t, res.RebuiltPath, "an erasure left the rows a rerun kept")
	entries, err := os.ReadDir(history.RerunKeptDir(c.db))
	require.NoError(t, err)
	require.Empty(t, entries)
}
