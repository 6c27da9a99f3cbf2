// The temporary exports a publisher hashes: beside the database, one
// folder per process, removed by the next publisher when their process is
// gone and by an erasure (job.PublishTempDir).

package publisher

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/idem-dev/idem/internal/job"
	"github.com/idem-dev/idem/internal/run"
)

// tempDir makes this process's folder for temporary exports beside the
// database at dbPath, after removing the folders of processes that are
// gone (a publisher killed while hashing leaves its plaintext export
// there). The caller removes the folder it gets.
func tempDir(dbPath string) (string, error) {
	root := job.PublishTempDir(dbPath)
	if err := removeDeadTemps(root); err != nil {
		return "", err
	}
	if err := os.MkdirAll(root, 0o700); err != nil {
		return "", fmt.Errorf("make the folder of temporary exports: %w", err)
	}
	return os.MkdirTemp(root, strconv.Itoa(os.Getpid())+"-")
}

// removeDeadTemps removes the folders under root whose process (the
// number their name starts with) no longer runs.
func removeDeadTemps(root string) error {
	entries, err := os.ReadDir(root)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("list the temporary exports of killed publishers: %w", err)
	}
	for _, e := range entries {
		pidText, _, _ := strings.Cut(e.Name(), "-")
		pid, err := strconv.Atoi(pidText)
		if err == nil && pid != os.Getpid() && run.ProcessAlive(pid) {
			continue
		}
		if err := os.RemoveAll(filepath.Join(root, e.Name())); err != nil {
			return fmt.Errorf("remove the temporary export of a killed publisher: %w", err)
		}
	}
	return nil
}
