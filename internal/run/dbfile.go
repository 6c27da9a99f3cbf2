package run

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/idem-dev/idem/internal/catalog"
	"github.com/idem-dev/idem/internal/report"
)

// creatingTag names the file a new database is built in before it is linked
// into place: <db>.creating-<pid>-<random>.
const creatingTag = "creating"

// leftoverName returns a name beside path for a temporary file or folder of
// this process, <path>.<tag>-<pid>-<random>. A process killed before it
// removed it leaves it behind; sweepLeftovers(path, tag) removes it later.
func leftoverName(path, tag string) string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%s.%s-%d-%s", path, tag, os.Getpid(), hex.EncodeToString(b[:]))
}

// sweepLeftovers removes the files and folders beside path named by
// leftoverName with tag (and anything named after them, such as their
// .wal) whose process is no longer running. It is best effort: what it
// cannot remove stays for the next sweep. A process of another PID
// namespace or another host sharing the folder looks dead: the tag's users
// must only leave behind what nobody else reads.
func sweepLeftovers(path, tag string) {
	dir := filepath.Dir(path)
	prefix := filepath.Base(path) + "." + tag + "-"
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range entries {
		rest, ok := strings.CutPrefix(e.Name(), prefix)
		if !ok {
			continue
		}
		pidText, _, ok := strings.Cut(rest, "-")
		pid, err := strconv.Atoi(pidText)
		if !ok || err != nil || pid <= 0 || ProcessAlive(pid) {
			continue
		}
		_ = os.RemoveAll(filepath.Join(dir, e.Name()))
	}
}

// walPath is the WAL DuckDB keeps beside the database at path.
func walPath(path string) string { return path + ".wal" }

func hasWAL(path string) bool {
	st, err := os.Stat(walPath(path))
	return err == nil && st.Size() > 0
}

// createFile makes sure a database exists at path, so that DuckDB never
// creates it there itself: DuckDB creates a file with O_TRUNC before it
// locks it, and two processes creating the same new path at once could
// leave a 0-byte file that no later open accepts. The new database is built
// and checkpointed under a name of this process's own, then hard-linked to
// path, which fails when path exists: of two creators one links, the other
// finds the database made and opens it as any other. A kill at any moment
// leaves no database or a complete one, and a <db>.creating-* file that the
// next writable open removes.
//
// A 0-byte file at path (left by an older idem or a kill while DuckDB
// created it) is replaced, under a lock on the folder, when no process
// holds it and no WAL is beside it; a held one gives a *LockedError. A
// missing or empty file beside the erasure journal, replica or input store
// of a lost database is refused (checkNotLost, lostdb.go).
func createFile(ctx context.Context, dsn, path string, fault func(string)) error {
	st, err := os.Stat(path)
	switch {
	case err == nil && st.Size() > 0:
		return nil
	case err == nil:
		return replaceEmpty(ctx, dsn, path, fault)
	case !errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("open database %s: %w", path, err)
	}
	if hasWAL(path) {
		return fmt.Errorf("create database %s: %s exists without its database: it holds commits of a database that is gone; "+
			"move it away to create a new database here", path, walPath(path))
	}
	if err := checkNotLost(path, false); err != nil {
		return err
	}
	tmp, err := buildNew(ctx, dsn, path, fault)
	if err != nil {
		return err
	}
	defer os.Remove(tmp)
	if fault != nil {
		fault(FaultCreateBuilt)
	}
	if err := os.Link(tmp, path); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return nil // another process created it first
		}
		return fmt.Errorf("create database %s: %w", path, err)
	}
	if fault != nil {
		fault(FaultCreateLinked)
	}
	return syncDir(filepath.Dir(path))
}

// replaceEmpty replaces the 0-byte file at path with a new database, or
// leaves it when another process holds it or created the database since.
func replaceEmpty(ctx context.Context, dsn, path string, fault func(string)) error {
	unlock, err := lockDir(filepath.Dir(path))
	if err != nil {
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return &report.LockedError{Path: path, Err: errors.New("another process is creating it")}
		}
		return fmt.Errorf("create database %s: lock folder: %w", path, err)
	}
	defer unlock()
	st, err := os.Stat(path)
	if err != nil || st.Size() > 0 {
		// Gone or created meanwhile: start over on what is there now.
		unlock()
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("open database %s: %w", path, err)
		}
		return createFile(ctx, dsn, path, fault)
	}
	if hasWAL(path) {
		return fmt.Errorf("open database %s: the file is empty (0 bytes) and a WAL %s is beside it: "+
			"restore the database from a backup, or move both away to create a new one", path, walPath(path))
	}
	pid, err := lockHolder(path)
	if err != nil {
		return fmt.Errorf("open database %s: %w", path, err)
	}
	if pid > 0 {
		return &report.LockedError{Path: path, PID: pid, Err: errors.New("an empty database file is held")}
	}
	if err := checkNotLost(path, true); err != nil {
		return err
	}
	tmp, err := buildNew(ctx, dsn, path, fault)
	if err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("create database %s: %w", path, err)
	}
	return syncDir(filepath.Dir(path))
}

// buildNew creates a database with idem's tables under a leftoverName
// beside path, checkpointed and closed, and returns its name. fault, when
// set, is called with FaultCreateBuilding once DuckDB has the file open.
func buildNew(ctx context.Context, dsn, path string, fault func(string)) (string, error) {
	sweepLeftovers(path, creatingTag)
	tmp := leftoverName(path, creatingTag)
	db, err := openFile(ctx, dsn, tmp, false)
	if err == nil && fault != nil {
		fault(FaultCreateBuilding)
	}
	if err == nil {
		err = catalog.Migrate(ctx, db, path, nil)
		err = errors.Join(err, db.Close())
	}
	if err == nil && hasWAL(tmp) {
		err = errors.New("its WAL was not checkpointed")
	}
	if err != nil {
		_ = os.Remove(tmp)
		_ = os.Remove(walPath(tmp))
		return "", report.Canceled(ctx, fmt.Errorf("create database %s: %w", path, err))
	}
	_ = os.Remove(walPath(tmp))
	return tmp, nil
}

// lockDir takes an exclusive flock on the folder dir without waiting: it
// fails with EWOULDBLOCK when another process holds it.
func lockDir(dir string) (func(), error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, err
	}
	var once bool
	return func() {
		if !once {
			once = true
			f.Close()
		}
	}, nil
}

// lockHolder returns the PID of a process holding a POSIX lock on the file
// (DuckDB locks its database file that way), or 0.
func lockHolder(path string) (int, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	lk := syscall.Flock_t{Type: syscall.F_WRLCK}
	if err := syscall.FcntlFlock(f.Fd(), syscall.F_GETLK, &lk); err != nil {
		return 0, err
	}
	if lk.Type == syscall.F_UNLCK {
		return 0, nil
	}
	return int(lk.Pid), nil
}

func syncDir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := f.Sync(); err != nil && !errors.Is(err, syscall.EINVAL) {
		return fmt.Errorf("sync folder %s: %w", dir, err)
	}
	return nil
}
