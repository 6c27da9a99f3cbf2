package source

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/idem-dev/idem/internal/catalog"
	"github.com/idem-dev/idem/internal/report"
)

// tempPrefix starts the name of every temporary file idem writes into the
// retained-input store (a copy being retained, an input being rewritten by
// erase). A killed process leaves them; the next writer removes them.
const tempPrefix = ".idem-tmp-"

// IsTempName says whether a name in the store is a temporary file or
// folder of idem's (tempPrefix), not a retained file.
func IsTempName(name string) bool { return strings.HasPrefix(name, tempPrefix) }

// Sweep deletes every file in the retained-input store that no
// committed idem.inputs row names: the copy a failed or killed run retained,
// the raw copy a run replaced by a scrubbed one, the originals an erasure
// rewrote, and temporary files. A retained file's life is thus decided by
// the committed tables alone, so a kill between a COMMIT and its file work
// loses nothing: the next open of the database for writing finishes it. It
// must run only while this process holds the write lock and no run of this
// handle is between retain and COMMIT. A read-only handle sees commits
// still in the WAL, so it may sweep too. It returns how many files it
// removed.
func Sweep(ctx context.Context, q catalog.Querier, dbPath string) (int, error) {
	dir := StoreDir(dbPath)
	if _, err := os.Lstat(dir); errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	keep, err := catalog.RetainedSums(ctx, q)
	if err != nil {
		return 0, fmt.Errorf("read retained inputs of %s: %w", dbPath, err)
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

// VerifyRetained checks that the retained copy of f still has f's sha256,
// so that nothing is staged from a copy edited after it was stored.
func VerifyRetained(ctx context.Context, dbPath string, f catalog.InputRef) error {
	p := RetainedPath(dbPath, f.SHA256)
	sum, _, err := SumFile(ctx, p, nil)
	if err != nil {
		return fmt.Errorf("retained input %s (%s): %w", f.Name, p, err)
	}
	if sum != f.SHA256 {
		return fmt.Errorf("retained input %s (%s) was changed: its sha256 is %s, recorded %s", f.Name, p, report.Short(sum), report.Short(f.SHA256))
	}
	return nil
}

// StoreDir is the folder beside the database that retains committed inputs,
// content-addressed by sha256.
func StoreDir(dbPath string) string { return dbPath + ".inputs" }

func RetainedPath(dbPath, sum string) string {
	return filepath.Join(StoreDir(dbPath), sum[:2], sum)
}

// Retain copies each input file into the store (once per content) and
// points Retained at the copy. The copy is synced before the run commits, so
// a committed snapshot's inputs survive a crash. The copy's bytes are checked
// against the digest: a file that changed since it was hashed is an error.
// A copy already in the store is reused only when its bytes still have the
// digest; one that does not (edited, truncated) is replaced by a new copy.
func Retain(ctx context.Context, dbPath string, files []InputFile, progress report.Progress) error {
	for i := range files {
		f := &files[i]
		dst := RetainedPath(dbPath, f.SHA256)
		if st, err := os.Stat(dst); err == nil && st.Mode().IsRegular() && st.Size() == f.Size {
			sum, _, err := SumFile(ctx, dst, nil)
			if err != nil && ctx.Err() != nil {
				return ctx.Err()
			}
			if err == nil && sum == f.SHA256 {
				f.Retained = dst
				continue
			}
		}
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return fmt.Errorf("retain input %s: %w", f.Path, err)
		}
		if err := copyVerified(ctx, f.Path, dst, f.SHA256, f.Size, progress); err != nil {
			return err
		}
		f.Retained = dst
	}
	return nil
}

func copyVerified(ctx context.Context, src, dst, sum string, size int64, progress report.Progress) error {
	in, err := os.Open(src)
	if err != nil {
		return fmt.Errorf("retain input %s: %w", src, err)
	}
	defer in.Close()
	tmp, err := os.CreateTemp(filepath.Dir(dst), tempPrefix+"retain-*")
	if err != nil {
		return fmt.Errorf("retain input %s: %w", src, err)
	}
	defer os.Remove(tmp.Name())
	h := sha256.New()
	buf := make([]byte, 1<<20)
	var done int64
	for {
		if err := ctx.Err(); err != nil {
			tmp.Close()
			return err
		}
		n, rerr := in.Read(buf)
		if n > 0 {
			h.Write(buf[:n])
			if _, err := tmp.Write(buf[:n]); err != nil {
				tmp.Close()
				return fmt.Errorf("retain input %s: %w", src, err)
			}
			done += int64(n)
			progress.Count("retain "+filepath.Base(src), done, size)
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			tmp.Close()
			return fmt.Errorf("retain input %s: %w", src, rerr)
		}
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("retain input %s: %w", src, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("retain input %s: %w", src, err)
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != sum {
		return fmt.Errorf("input %s changed while the run read it (sha256 %s, then %s)", src, sum[:12], got[:12])
	}
	if err := os.Rename(tmp.Name(), dst); err != nil {
		return fmt.Errorf("retain input %s: %w", src, err)
	}
	return nil
}
