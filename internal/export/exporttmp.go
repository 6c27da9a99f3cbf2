package export

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"github.com/idem-dev/idem/internal/run"
)

// Fault points of an export: an Options.Fault hook is called with
// each name as the export reaches it (the CLI's IDEM_FAULT kills the
// process there; see docs/reliability.md).
const (
	// FaultExportPart is called after each partition file is written into
	// the temporary folder, followed by its index from 1.
	FaultExportPart = "export_part:"
	// FaultExportBeforeSwap is called when the temporary file or folder is
	// complete, before it is renamed into place.
	FaultExportBeforeSwap = "export_before_swap"
	// FaultExportAfterSwap is called once the new export is in place and
	// the previous one, moved aside, is not yet removed.
	FaultExportAfterSwap = "export_after_swap"
)

// exportTempPrefix starts the name of every temporary file or folder an
// export writes beside its output:
// .idem-export-<output name>-<pid>-<16 hex>[.old]. The next export to the
// same output removes those whose process is gone.
const exportTempPrefix = ".idem-export-"

var exportTempRest = regexp.MustCompile(`^([0-9]+)-[0-9a-f]{16}(\.old)?$`)

// exportTempTag is the output's name as temporary names carry it: the name
// itself, or, when long, a prefix and a hash, so that a temporary name stays
// within the 255 bytes a file name may take.
func exportTempTag(out string) string {
	base := filepath.Base(out)
	if len(base) <= 160 {
		return base
	}
	sum := sha256.Sum256([]byte(base))
	return base[:100] + "~" + hex.EncodeToString(sum[:8])
}

// exportTempName is a fresh temporary name beside out, owned by this
// process.
func exportTempName(out string) (string, error) {
	var rnd [8]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		return "", fmt.Errorf("export to %s: %w", out, err)
	}
	name := exportTempPrefix + exportTempTag(out) + "-" + strconv.Itoa(os.Getpid()) + "-" + hex.EncodeToString(rnd[:])
	return filepath.Join(filepath.Dir(out), name), nil
}

// cleanExportTemps removes the temporary files and folders that exports to
// out left beside it when their process died (a kill, a crash): those of a
// live process are another export at work and stay. A previous export moved
// aside (.old) while out is missing is the state a kill between the two
// renames of a swap leaves: it is renamed back to out, so the reader sees
// the previous export again.
func cleanExportTemps(out string) error {
	dir := filepath.Dir(out)
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("export to %s: %w", out, err)
	}
	prefix := exportTempPrefix + exportTempTag(out) + "-"
	var stale []string
	for _, e := range entries {
		rest, ok := strings.CutPrefix(e.Name(), prefix)
		if !ok {
			continue
		}
		m := exportTempRest.FindStringSubmatch(rest)
		if m == nil {
			continue
		}
		pid, err := strconv.Atoi(m[1])
		if err != nil || pid == os.Getpid() || run.ProcessAlive(pid) {
			continue
		}
		path := filepath.Join(dir, e.Name())
		if m[2] != "" {
			if _, err := os.Lstat(out); errors.Is(err, os.ErrNotExist) {
				if err := os.Rename(path, out); err != nil {
					return fmt.Errorf("export to %s: restore the previous export from %s: %w", out, e.Name(), err)
				}
				continue
			}
		}
		stale = append(stale, path)
	}
	for _, p := range stale {
		if err := os.RemoveAll(p); err != nil {
			return fmt.Errorf("export to %s: remove a killed export's %s: %w", out, filepath.Base(p), err)
		}
	}
	return nil
}

// errNoExchange says the platform or file system cannot swap two paths in
// one rename.
var errNoExchange = errors.New("atomic exchange not supported")

// swapDir puts the complete folder tmp in place of out. With no out it is
// one rename. Otherwise the two are exchanged in one rename where the
// system can (Linux renameat2 RENAME_EXCHANGE), so a reader sees the
// previous export or the new one at every instant; elsewhere out is
// renamed aside to tmp.old and tmp renamed in, and a kill between the two
// leaves tmp.old, which the next export renames back. The previous export
// is then removed.
func swapDir(tmp, out string, exchange func(a, b string) error, fault func(string)) error {
	if _, err := os.Lstat(out); errors.Is(err, os.ErrNotExist) {
		fault(FaultExportBeforeSwap)
		if err := os.Rename(tmp, out); err != nil {
			return fmt.Errorf("export to %s: %w", out, err)
		}
		return nil
	}
	fault(FaultExportBeforeSwap)
	old := tmp
	err := exchange(tmp, out)
	if err != nil {
		if !errors.Is(err, errNoExchange) {
			return fmt.Errorf("export to %s: %w", out, err)
		}
		old = tmp + ".old"
		if err := os.Rename(out, old); err != nil {
			return fmt.Errorf("export to %s: move the previous export aside: %w", out, err)
		}
		if err := os.Rename(tmp, out); err != nil {
			if rerr := os.Rename(old, out); rerr != nil {
				err = errors.Join(err, fmt.Errorf("restore the previous export from %s: %w", old, rerr))
			}
			return fmt.Errorf("export to %s: %w", out, err)
		}
	}
	fault(FaultExportAfterSwap)
	if err := os.RemoveAll(old); err != nil {
		return fmt.Errorf("export to %s: remove the previous export: %w", out, err)
	}
	return nil
}
