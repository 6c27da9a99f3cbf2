package run

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// Fault points of idem backup (dbfile.Backup): the database file is copied
// into the partial folder; every file is copied and the manifest is not
// yet written; the manifest is written and the partial folder not yet
// renamed into place.
const (
	FaultBackupCopied         = "backup_copied"
	FaultBackupBeforeManifest = "backup_before_manifest"
	FaultBackupBeforeRename   = "backup_before_rename"
)

// partialTag names the folder a backup is built in before it is renamed
// into place: <dir>.partial-<pid>-<random>.
const partialTag = "partial"

// NewPartialDir removes the partial folders that killed backups to dir
// left, then makes a new one beside dir and returns it.
func NewPartialDir(dir string) (string, error) {
	sweepLeftovers(dir, partialTag)
	p := leftoverName(dir, partialTag)
	if err := os.Mkdir(p, 0o755); err != nil {
		return "", fmt.Errorf("backup to %s: %w", dir, err)
	}
	return p, nil
}

// CopyFileTo copies the database file, which the caller has checkpointed
// (Checkpoint) and holds open for writing so that no other process writes
// it, to dst, a new file, and syncs it. It fails when the file changed
// during the copy. It returns how the file was copied: clone (a reflink)
// or copy.
func (d *DB) CopyFileTo(dst string) (string, error) {
	if d.readOnly {
		return "", fmt.Errorf("copy %s: the database is open read-only", d.path)
	}
	if hasWAL(d.path) {
		return "", fmt.Errorf("copy %s: the WAL was not checkpointed", d.path)
	}
	before, err := os.Stat(d.path)
	if err != nil {
		return "", fmt.Errorf("copy %s: %w", d.path, err)
	}
	method, err := d.copyTo(dst)
	if after, serr := os.Stat(d.path); err == nil && (serr != nil || after.Size() != before.Size() ||
		!after.ModTime().Equal(before.ModTime()) || hasWAL(d.path)) {
		err = errors.New("the database changed during the copy")
	}
	if err == nil {
		err = syncFile(dst)
	}
	if err != nil {
		return "", fmt.Errorf("copy %s to %s: %w", d.path, dst, err)
	}
	return method, nil
}

// SyncFile flushes the file at path to stable storage.
func SyncFile(path string) error {
	if err := syncFile(path); err != nil {
		return fmt.Errorf("sync %s: %w", path, err)
	}
	return nil
}

// SyncDir flushes the folder dir (its entries: names created, renamed or
// removed) to stable storage.
func SyncDir(dir string) error { return syncDir(dir) }

// SyncTree syncs every folder under root, root included, deepest first.
func SyncTree(root string) error {
	var dirs []string
	err := filepath.WalkDir(root, func(p string, e os.DirEntry, err error) error {
		if err == nil && e.IsDir() {
			dirs = append(dirs, p)
		}
		return err
	})
	for i := len(dirs) - 1; i >= 0 && err == nil; i-- {
		err = syncDir(dirs[i])
	}
	return err
}
