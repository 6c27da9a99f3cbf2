package run

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// A wait is announced by a file beside the database that names the
// waiting process; a mark whose process is gone is removed, not counted,
// so a killed waiter never makes a follower yield for ever.
func TestWaitingMarks(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "x.duckdb")
	require.Zero(t, waiters(db))
	m := markWaiting(db)
	require.NotEmpty(t, m)
	require.Equal(t, 1, waiters(db))
	dead := db + ".waiting-2147483646-1"
	require.NoError(t, os.WriteFile(dead, nil, 0o644))
	require.Equal(t, 1, waiters(db))
	require.NoFileExists(t, dead)
	unmarkWaiting(m)
	require.Zero(t, waiters(db))
	require.NoFileExists(t, m)
}
