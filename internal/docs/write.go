package docs

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/idem-dev/idem/internal/report"
)

// Write puts page in folder dir as index.html, creating the folder. It
// never removes or overwrites a file it did not write: a folder that holds
// anything but an index.html beginning with Marker is refused (a usage
// error, exit 2, naming what is there), as is a dir that is a file. The
// page is written to a temporary file in dir and renamed over index.html,
// so a reader sees the old page or the new one, whole.
func Write(dir string, page []byte) error {
	st, err := os.Stat(dir)
	switch {
	case err == nil && !st.IsDir():
		return &report.UsageError{Msg: fmt.Sprintf("--out %s is a file: give a folder for the site", dir)}
	case err == nil:
		if err := checkOwned(dir); err != nil {
			return err
		}
	case os.IsNotExist(err):
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("create %s: %w", dir, err)
		}
	default:
		return fmt.Errorf("--out %s: %w", dir, err)
	}
	tmp, err := os.CreateTemp(dir, tempPattern)
	if err != nil {
		return fmt.Errorf("write %s: %w", dir, err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(page); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", tmp.Name(), err)
	}
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write %s: %w", tmp.Name(), err)
	}
	to := filepath.Join(dir, IndexFile)
	if err := os.Rename(tmp.Name(), to); err != nil {
		return fmt.Errorf("write %s: %w", to, err)
	}
	return nil
}

// tempPattern names the temporary file a page is written to before it is
// renamed into place.
const tempPattern = ".idem-docs-*.tmp"

// checkOwned refuses a folder that holds anything idem docs did not write.
func checkOwned(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("read --out %s: %w", dir, err)
	}
	var foreign []string
	for _, e := range entries {
		if e.Name() == IndexFile && e.Type().IsRegular() && ownPage(filepath.Join(dir, e.Name())) {
			continue
		}
		if ok, _ := filepath.Match(tempPattern, e.Name()); ok && e.Type().IsRegular() {
			continue // a page an interrupted idem docs left half written
		}
		foreign = append(foreign, e.Name())
	}
	if len(foreign) == 0 {
		return nil
	}
	slices.Sort(foreign)
	shown := foreign
	if len(shown) > 5 {
		shown = append(slices.Clone(shown[:5]), fmt.Sprintf("and %d more", len(foreign)-5))
	}
	return &report.UsageError{Msg: fmt.Sprintf("--out %s holds files idem docs did not write (%s): give a new or empty folder, or one an earlier idem docs wrote; nothing was changed",
		dir, strings.Join(shown, ", "))}
}

// ownPage says whether the file at path begins with Marker.
func ownPage(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	head := make([]byte, len(Marker))
	_, err = io.ReadFull(f, head)
	return err == nil && bytes.Equal(head, []byte(Marker))
}
