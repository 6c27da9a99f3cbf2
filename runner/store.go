package runner

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/idem-dev/idem/runner/catalog"
)

// tempPrefix starts the name of every temporary file idem writes into the
// retained-input store (a copy being retained, an input being rewritten by
// erase). A killed process leaves them; the next writer removes them.
const tempPrefix = ".idem-tmp-"

// sweepInputs deletes every file in the retained-input store that no
// committed idem.inputs row names: the copy a failed or killed run retained,
// the raw copy a run replaced by a scrubbed one, the originals an erasure
// rewrote, and temporary files. A retained file's life is thus decided by
// the committed tables alone, so a kill between a COMMIT and its file work
// loses nothing: the next open of the database for writing finishes it. It
// must run only while this process holds the write lock and no run of this
// handle is between retain and COMMIT. A read-only handle sees commits
// still in the WAL, so it may sweep too. It returns how many files it
// removed.
func (d *DB) sweepInputs(ctx context.Context) (int, error) {
	dir := storeDir(d.path)
	if _, err := os.Lstat(dir); errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	keep, err := catalog.RetainedSums(ctx, d.sql)
	if err != nil {
		return 0, fmt.Errorf("read retained inputs of %s: %w", d.path, err)
	}
	removed := 0
	var dirs []string
	err = filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if e.IsDir() {
			if p != dir {
				dirs = append(dirs, p)
			}
			return nil
		}
		name := e.Name()
		if keep[name] && len(name) > 2 && filepath.Base(filepath.Dir(p)) == name[:2] && filepath.Dir(filepath.Dir(p)) == dir {
			return nil
		}
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		removed++
		return nil
	})
	if err != nil {
		return removed, fmt.Errorf("remove retained inputs no committed row names from %s: %w", dir, err)
	}
	// Deepest first; a folder that still holds a file stays.
	for i := len(dirs) - 1; i >= 0; i-- {
		_ = os.Remove(dirs[i])
	}
	return removed, nil
}

// verifyRetained checks that the retained copy of f still has f's sha256,
// so that nothing is staged from a copy edited after it was stored.
func verifyRetained(ctx context.Context, dbPath string, f catalog.InputRef) error {
	p := retainedPath(dbPath, f.SHA256)
	sum, _, err := sumFile(ctx, p, nil)
	if err != nil {
		return fmt.Errorf("retained input %s (%s): %w", f.Name, p, err)
	}
	if sum != f.SHA256 {
		return fmt.Errorf("retained input %s (%s) was changed: its sha256 is %s, recorded %s", f.Name, p, short(sum), short(f.SHA256))
	}
	return nil
}
