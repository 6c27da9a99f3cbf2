package run

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	"github.com/idem-dev/idem/internal/report"
	"github.com/idem-dev/idem/internal/sqltext"
)

// Fault points of idem compact (see SwapIn and dbfile.Compact): the new file
// is written and synced in the scratch folder; it is verified against the
// database; the database is closed and held by compact's own lock, the old
// file linked into the scratch folder; the new file has been renamed over
// the database, before the folder is synced and the old file removed.
const (
	FaultCompactWritten      = "compact_written"
	FaultCompactVerified     = "compact_verified"
	FaultCompactBeforeRename = "compact_before_rename"
	FaultCompactAfterRename  = "compact_after_rename"
)

// compactCatalog is the name the new file of a compact is attached under.
const compactCatalog = "idem_compact_new"

// Checkpoint writes every commit into the database file and fails when
// commits stay in its WAL (a transaction of this process is open).
func (d *DB) Checkpoint(ctx context.Context) error {
	if _, err := d.sql.ExecContext(ctx, "CHECKPOINT"); err != nil {
		return fmt.Errorf("checkpoint %s: %w", d.path, err)
	}
	if hasWAL(d.path) {
		return fmt.Errorf("checkpoint %s: the WAL was not checkpointed", d.path)
	}
	return nil
}

// RewriteTo writes a new database file at out holding the database's
// schemas, tables, views, sequences, indexes, types and macros (COPY FROM
// DATABASE): only live rows reach it, so the space of deleted and erased
// rows is not carried over. The file is checkpointed, closed and synced.
func (d *DB) RewriteTo(ctx context.Context, out string) error {
	conn, err := d.sql.Conn(ctx)
	if err != nil {
		return fmt.Errorf("rewrite %s: %w", d.path, err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "ATTACH "+sqltext.SQLString(out)+" AS "+compactCatalog); err != nil {
		return fmt.Errorf("rewrite %s: attach %s: %w", d.path, out, err)
	}
	_, err = conn.ExecContext(ctx, "COPY FROM DATABASE "+storeCatalog+" TO "+compactCatalog)
	if err == nil {
		_, err = conn.ExecContext(ctx, "CHECKPOINT "+compactCatalog)
	}
	if _, derr := conn.ExecContext(context.WithoutCancel(ctx), "DETACH "+compactCatalog); derr != nil && err == nil {
		err = fmt.Errorf("detach: %w", derr)
	}
	if err == nil && hasWAL(out) {
		err = errors.New("its WAL was not checkpointed")
	}
	if err == nil {
		err = syncFile(out)
	}
	if err != nil {
		return report.Canceled(ctx, fmt.Errorf("rewrite %s into %s: %w", d.path, out, err))
	}
	_ = os.Remove(walPath(out))
	return nil
}

// SwapIn closes the database and puts the file at newPath in its place:
// the file is renamed over the database and the folder synced. newPath
// must be a complete, synced database on the same file system (RewriteTo
// in a scratch folder beside the database) and the database must have
// been checkpointed since its last commit.
//
// Between DuckDB's close and the rename the file stays locked: compact
// takes the same kind of lock on it (a POSIX record lock) that DuckDB
// takes, so a writer that tries to open it meanwhile gets a *LockedError
// (exit 4). If another writer took the file in the instant between DuckDB
// releasing it and compact locking it, or the file changed, nothing is
// swapped and an error says so. The old file is kept, hard-linked as
// keep, until the swap is durable, then removed. A kill leaves the old
// file or the new one at the database's path, never a part of either.
func (d *DB) SwapIn(newPath, keep string, fault func(string)) error {
	if d.readOnly {
		return fmt.Errorf("compact %s: the database is open read-only", d.path)
	}
	if hasWAL(d.path) {
		return fmt.Errorf("compact %s: the database has a WAL: it was written after its checkpoint", d.path)
	}
	before, err := os.Stat(d.path)
	if err != nil {
		return fmt.Errorf("compact %s: %w", d.path, err)
	}
	f, err := os.OpenFile(d.path, os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("compact %s: %w", d.path, err)
	}
	defer f.Close() // releases compact's lock
	if err := d.Close(); err != nil {
		return fmt.Errorf("compact %s: close: %w", d.path, err)
	}
	lk := syscall.Flock_t{Type: syscall.F_WRLCK}
	if err := syscall.FcntlFlock(f.Fd(), syscall.F_SETLK, &lk); err != nil {
		pid, _ := lockHolder(d.path)
		return &report.LockedError{Path: d.path, PID: pid, Err: fmt.Errorf("another process opened it while compact swapped it; nothing was swapped: %w", err)}
	}
	after, err := os.Stat(d.path)
	if err != nil {
		return fmt.Errorf("compact %s: %w", d.path, err)
	}
	if !os.SameFile(before, after) || after.Size() != before.Size() || !after.ModTime().Equal(before.ModTime()) || hasWAL(d.path) {
		return fmt.Errorf("compact %s: the database changed while compact closed it; nothing was swapped: run compact again", d.path)
	}
	if err := os.Link(d.path, keep); err != nil {
		return fmt.Errorf("compact %s: keep the old file: %w", d.path, err)
	}
	if fault != nil {
		fault(FaultCompactBeforeRename)
	}
	if err := os.Rename(newPath, d.path); err != nil {
		_ = os.Remove(keep)
		return fmt.Errorf("compact %s: %w", d.path, err)
	}
	if fault != nil {
		fault(FaultCompactAfterRename)
	}
	if err := syncDir(filepath.Dir(d.path)); err != nil {
		return fmt.Errorf("compact %s: the new file is in place but %w", d.path, err)
	}
	return os.Remove(keep)
}

// Reopen opens the database at d's path again, with the options d was
// opened with, in d: a command that compacted the database (which closes
// d) goes on with it. On error d stays closed.
func (d *DB) Reopen(ctx context.Context) error {
	if err := d.Close(); err != nil {
		return fmt.Errorf("reopen %s: %w", d.path, err)
	}
	nd, err := open(ctx, d.path, d.opts, nil)
	if err != nil {
		return err
	}
	*d = *nd
	return nil
}
