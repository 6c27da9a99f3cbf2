//go:build unix

package env

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/idem-dev/idem/internal/report"
	"github.com/stretchr/testify/require"
)

// TestLoadEnvironmentRefuses: an environment's record that is missing is a
// usage error; one that is a FIFO (whose read would block for ever), a
// symbolic link, a bad name or bad JSON is refused at once, naming it.
func TestLoadEnvironmentRefuses(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := filepath.Join(dir, "p.duckdb")
	require.NoError(t, os.MkdirAll(Dir(db), 0o755))
	_, err := LoadEnvironment(db, "none")
	require.ErrorIs(t, err, report.ErrUsage)
	require.ErrorContains(t, err, "no environment none")

	require.NoError(t, syscall.Mkfifo(envManifestPath(db, "fifo"), 0o644))
	_, err = LoadEnvironment(db, "fifo")
	require.ErrorContains(t, err, "is not a regular file")

	target := filepath.Join(dir, "elsewhere.json")
	require.NoError(t, os.WriteFile(target, []byte(`{"name":"link"}`), 0o644))
	require.NoError(t, os.Symlink(target, envManifestPath(db, "link")))
	_, err = LoadEnvironment(db, "link")
	require.ErrorContains(t, err, "is not a regular file")

	_, err = LoadEnvironment(db, "../p")
	require.ErrorIs(t, err, report.ErrUsage)

	require.NoError(t, os.WriteFile(envManifestPath(db, "bad"), []byte("{"), 0o644))
	_, err = LoadEnvironment(db, "bad")
	require.ErrorContains(t, err, "environment bad:")

	// env list passes over what it cannot read; the good one is listed.
	require.NoError(t, SaveEnvironment(&Environment{Name: "good", Database: db}))
	envs, err := ListEnvironments(db)
	require.NoError(t, err)
	require.Len(t, envs, 1)
	require.Equal(t, "good", envs[0].Name)
}
