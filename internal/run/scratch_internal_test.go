package run

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestStaleRerunScratch: the scratch folder of a live rerun is kept; one
// whose lock no process holds, or that has no lock file and names a dead
// process, is removed; other files beside the database are left alone.
func TestStaleRerunScratch(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := filepath.Join(dir, "idem.duckdb")
	live, release, err := NewScratchDir(db)
	require.NoError(t, err)
	require.Equal(t, dir, filepath.Dir(live))

	unlocked := db + ".rerun-1-abc" // a killed rerun: its lock file is no longer held
	require.NoError(t, os.MkdirAll(unlocked, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(unlocked, scratchLock), nil, 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(unlocked, "scratch.duckdb"), []byte("x"), 0o644))
	deadPID := db + ".rerun-2147483646-abc" // killed before it made its lock file
	require.NoError(t, os.MkdirAll(deadPID, 0o755))
	livePID := db + ".rerun-" + strconv.Itoa(os.Getpid()) + "-abc" // being made by a live process
	require.NoError(t, os.MkdirAll(livePID, 0o755))
	other := db + ".wal"
	require.NoError(t, os.WriteFile(other, nil, 0o644))

	removeStaleScratch(db)
	require.DirExists(t, live)
	require.DirExists(t, livePID)
	require.FileExists(t, other)
	require.NoDirExists(t, unlocked)
	require.NoDirExists(t, deadPID)

	release()
	require.NoDirExists(t, live)
}
