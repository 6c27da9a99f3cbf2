package clitest

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// RequireNoPayload fails when a file under root other than except holds
// payload.
func RequireNoPayload(t *testing.T, root, payload, except string) {
	t.Helper()
	n := 0
	require.NoError(t, filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || p == except {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		n++
		require.False(t, bytes.Contains(data, []byte(payload)), "%s holds %s", p, payload)
		return nil
	}))
	require.Positive(t, n, "no file under %s", root)
}
