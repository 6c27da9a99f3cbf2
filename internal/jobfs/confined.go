package jobfs

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// ConfinedFS is the file system of a pipeline folder on disk: it opens a
// file only when it resolves inside the folder, symbolic links followed
// (os.Root), so that a link in the folder cannot make a job run SQL from
// elsewhere, which its key would not name as the folder's. Dir is the
// folder with its own links resolved (allowedPipelineDir).
type ConfinedFS struct{ Dir string }

// Open opens name, a slash-separated path inside the folder.
func (c ConfinedFS) Open(name string) (fs.File, error) {
	if !fs.ValidPath(name) {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrInvalid}
	}
	root, err := os.OpenRoot(c.Dir)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	// Opening a FIFO blocks until a writer comes: only a regular file (or
	// a folder) is opened.
	if st, err := root.Stat(filepath.FromSlash(name)); err == nil && !st.Mode().IsRegular() && !st.IsDir() {
		return nil, notRegular(name)
	}
	f, err := root.Open(filepath.FromSlash(name))
	if err == nil {
		return f, nil
	}
	// os.Root follows no absolute link: one that leads inside the folder
	// is opened where it leads.
	real, inside, e := resolve(c.Dir, name)
	if e != nil {
		return nil, err
	}
	if !inside {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fmt.Errorf("a symbolic link to %s, outside folder %s: a job reads only the files inside its folders", real, c.Dir)}
	}
	if st, err := os.Stat(real); err == nil && !st.Mode().IsRegular() && !st.IsDir() {
		return nil, notRegular(name)
	}
	return os.Open(real)
}

// notRegular refuses a file that is not a regular file (a FIFO, a device).
func notRegular(name string) error {
	return &fs.PathError{Op: "open", Path: name, Err: errors.New("not a regular file")}
}

// ReadConfined reads SQL file name of folder dir, refusing one that
// resolves outside it or is larger than MaxSQLBytes (ReadSQLFile).
func ReadConfined(dir, name string) ([]byte, error) {
	return ReadSQLFile(ConfinedFS{Dir: dir}, name, filepath.Join(dir, filepath.FromSlash(name)))
}

// resolve is where file name of dir leads, symbolic links followed, and
// whether that is inside dir.
func resolve(dir, name string) (string, bool, error) {
	real, err := filepath.EvalSymlinks(filepath.Join(dir, filepath.FromSlash(name)))
	if err != nil {
		return "", false, err
	}
	return real, Within(dir, real), nil
}

// Within says whether path lies in folder root (or is root); both have
// their symbolic links resolved.
func Within(root, path string) bool {
	rel, err := filepath.Rel(root, path)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}
