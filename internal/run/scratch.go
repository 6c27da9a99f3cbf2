package run

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/idem-dev/idem/internal/sqltext"
)

// keptTemp are the temp tables a run still reads once the outcomes are
// counted: idem_touched for history, and idem's own erasure list.
var keptTemp = map[string]bool{"idem_touched": true, "idem_erased": true}

// dropScratch drops the temp tables the steps left once the run has counted
// the outcomes (staged, outcomes and a pipeline's intermediate results):
// left in place, COMMIT carries them and their memory stays taken through
// the history update.
func dropScratch(ctx context.Context, tx *sql.Tx) error {
	rows, err := tx.QueryContext(ctx, `SELECT table_name FROM duckdb_tables() WHERE database_name = 'temp' ORDER BY table_name`)
	if err != nil {
		return fmt.Errorf("list temp tables: %w", err)
	}
	var drop []string
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			rows.Close()
			return err
		}
		if !keptTemp[name] {
			drop = append(drop, name)
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	for _, name := range drop {
		if _, err := tx.ExecContext(ctx, "DROP TABLE temp.main."+sqltext.QuoteIdent(name)); err != nil {
			return fmt.Errorf("drop temp table %s: %w", name, err)
		}
	}
	return nil
}

// Rerun scratch folders. A rerun builds in a folder beside the database,
// <db>.rerun-<pid>-<random>, not in $TMPDIR: a killed rerun leaves it where
// the next one looks. The rerun holds an exclusive flock on the folder's
// lock file while it lives; the kernel drops the lock when the process dies
// however it dies, so a folder whose lock can be taken was left by a dead
// process and is removed. A folder without a lock file yet is removed only
// when the process its name gives is gone.

const scratchLock = "lock"

// scratchPattern is the glob of the rerun scratch folders of database path.
func scratchPattern(path string) string { return path + ".rerun-*" }

// NewScratchDir removes the scratch folders that dead reruns left beside
// database path, then makes and locks a new one. release unlocks and
// removes it.
func NewScratchDir(path string) (dir string, release func(), err error) {
	removeStaleScratch(path)
	dir, err = os.MkdirTemp(filepath.Dir(path), filepath.Base(path)+fmt.Sprintf(".rerun-%d-*", os.Getpid()))
	if err != nil {
		return "", nil, fmt.Errorf("rerun: scratch folder beside %s: %w", path, err)
	}
	lock, err := os.OpenFile(filepath.Join(dir, scratchLock), os.O_CREATE|os.O_RDWR, 0o644)
	if err == nil {
		err = syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	}
	if err != nil {
		if lock != nil {
			lock.Close()
		}
		os.RemoveAll(dir)
		return "", nil, fmt.Errorf("rerun: lock scratch folder %s: %w", dir, err)
	}
	return dir, func() {
		os.RemoveAll(dir)
		lock.Close()
	}, nil
}

// removeStaleScratch removes the rerun scratch folders beside database path
// that no live process holds. Errors are ignored: a folder that cannot be
// removed now is tried again by the next rerun.
func removeStaleScratch(path string) {
	dirs, _ := filepath.Glob(scratchPattern(path))
	for _, dir := range dirs {
		if st, err := os.Stat(dir); err != nil || !st.IsDir() {
			continue
		}
		lock, err := os.OpenFile(filepath.Join(dir, scratchLock), os.O_RDWR, 0)
		if err != nil {
			// Made but not yet locked: stale only if its process is gone.
			if os.IsNotExist(err) && !ProcessAlive(scratchPID(dir)) {
				os.RemoveAll(dir)
			}
			continue
		}
		if syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) == nil {
			os.RemoveAll(dir)
		}
		lock.Close()
	}
}

// scratchPID is the process id in a scratch folder's name, or 0.
func scratchPID(dir string) int {
	rest := filepath.Base(dir)
	if i := strings.LastIndex(rest, ".rerun-"); i >= 0 {
		rest = rest[i+len(".rerun-"):]
	}
	pid, _ := strconv.Atoi(strings.SplitN(rest, "-", 2)[0])
	return pid
}
