package run

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/idem-dev/idem/internal/report"
	"github.com/idem-dev/idem/internal/source"
)

// A database file that is missing or empty (0 bytes) while what a database
// leaves beside it is there, the erasure journal, the read replica or the
// retained-input store, was lost (deleted, truncated, a restore that
// forgot the file): creating a new database there would ignore the
// journal (the erased subjects would come back from the landing files),
// overwrite the replica (the only intact copy) and sweep the old
// retained inputs. A writable open refuses it (LostDatabaseError) instead.

// LostDatabaseError refuses to create a database where one was lost: Path
// is missing or empty and Found names what is beside it. It wraps
// report.ErrRefused (exit 3).
type LostDatabaseError struct {
	Path  string
	Empty bool // the file is there with 0 bytes
	Found []string
	Moved []string // the paths to move away to start a new database
}

func (e *LostDatabaseError) Error() string {
	state := "is missing"
	if e.Empty {
		state = "is empty (0 bytes)"
	}
	return fmt.Sprintf("database %s %s, and beside it are %s: the database was lost, and a new one created here would ignore its erasure journal, overwrite its replica and sweep its retained inputs; nothing was created. "+
		"Restore it: copy a backup's database file and its .inputs folder back (idem backup --verify DIR checks the backup first), or copy the read replica %s to %s, "+
		"then apply the erasures made since with `idem erase --replay-journal JOB_OR_PROJECT_DIR --db %s`. To start a new database here instead, move %s away",
		e.Path, state, strings.Join(e.Found, ", "), ReplicaPath(e.Path), e.Path, e.Path, strings.Join(e.Moved, ", "))
}

func (e *LostDatabaseError) Unwrap() error { return report.ErrRefused }

// checkNotLost refuses (*LostDatabaseError) to create a database at path,
// missing or empty, when an erasure journal, a read replica or a
// retained-input store of a lost database is beside it.
func checkNotLost(path string, empty bool) error {
	var found, moved []string
	if st, err := os.Stat(JournalPath(path)); err == nil && st.Size() > 0 {
		what := "the erasure journal " + JournalPath(path)
		if entries, err := readJournal(JournalPath(path)); err == nil {
			what += fmt.Sprintf(" (%d erasure(s))", len(entries))
		}
		found, moved = append(found, what), append(moved, JournalPath(path))
	}
	if _, err := os.Stat(ReplicaPath(path)); err == nil {
		found, moved = append(found, "the read replica "+ReplicaPath(path)), append(moved, ReplicaPath(path))
	}
	if n := storedFiles(source.StoreDir(path)); n > 0 {
		found = append(found, fmt.Sprintf("the retained-input store %s (%d file(s))", source.StoreDir(path), n))
		moved = append(moved, source.StoreDir(path))
	}
	if len(found) == 0 {
		return nil
	}
	return &LostDatabaseError{Path: path, Empty: empty, Found: found, Moved: moved}
}

// storedFiles counts the files in the retained-input store dir (its
// temporary folders left out).
func storedFiles(dir string) int {
	n := 0
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		switch {
		case err != nil:
			return err
		case d.IsDir() && p != dir && source.IsTempName(d.Name()):
			return filepath.SkipDir
		case d.Type().IsRegular() && !source.IsTempName(d.Name()):
			n++
		}
		return nil
	})
	if err != nil && !errors.Is(err, fs.ErrNotExist) && n == 0 {
		return 1 // unreadable: something is there
	}
	return n
}
