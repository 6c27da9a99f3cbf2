package clitest

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idem-dev/idem/internal/dbfile"
)

// Restore copies a backup folder's files, the manifest aside, into a new
// folder as the README says, and returns the restored database's path.
func Restore(t *testing.T, backup string) string {
	t.Helper()
	to := filepath.Join(t.TempDir(), "restored")
	CopyDir(t, backup, to)
	require.NoError(t, os.Remove(filepath.Join(to, dbfile.BackupManifestName)))
	return filepath.Join(to, "idem.duckdb")
}
