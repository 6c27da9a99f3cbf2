//go:build unix

package job

import (
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

// A job file that is a FIFO (or a link to one) is refused at once: opening
// it would wait for a writer for ever.
func TestJobFileFIFO(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	fifo := filepath.Join(dir, "j.toml")
	require.NoError(t, syscall.Mkfifo(fifo, 0o644))
	_, err := ReadJobFile(fifo)
	require.ErrorContains(t, err, "cannot read job file: not a regular file")
}
