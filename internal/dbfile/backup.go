package dbfile

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/idem-dev/idem/internal/catalog"
	"github.com/idem-dev/idem/internal/report"
	"github.com/idem-dev/idem/internal/run"
	"github.com/idem-dev/idem/internal/source"
	"github.com/idem-dev/idem/internal/sqltext"
)

// BackupManifestName is the file a backup writes last: a folder without
// it is not a backup.
const BackupManifestName = "manifest.json"

// backupFormat names the layout of a backup folder.
const backupFormat = "idem-backup-1"

// BackupManifest is the manifest.json of a backup folder: the database it
// copies, the commit it holds, and every file with its size and sha256.
type BackupManifest struct {
	Format string `json:"format"`
	// Database is the database file's name in the folder; its retained
	// inputs are under Database + ".inputs/".
	Database   string       `json:"database"`
	DatabaseID string       `json:"database_id"`
	Commit     int64        `json:"commit"`
	CreatedAt  time.Time    `json:"created_at"`
	Files      []BackupFile `json:"files"`
}

// BackupFile is one file of a backup: its path in the folder (with /), its
// size and sha256.
type BackupFile struct {
	Path   string `json:"path"`
	Bytes  int64  `json:"bytes"`
	SHA256 string `json:"sha256"`
}

// BackupResult reports a backup written or verified.
type BackupResult struct {
	Dir        string  `json:"dir"`
	Database   string  `json:"database"`
	DatabaseID string  `json:"database_id"`
	Commit     int64   `json:"commit"`
	Files      int     `json:"files"`
	Bytes      int64   `json:"bytes"`
	Seconds    float64 `json:"seconds"`
}

// BackupOptions say how idem backup runs.
type BackupOptions struct {
	// Fault, when set, is called at each fault point (run.FaultBackup*)
	// for kill tests.
	Fault func(point string)
}

// Backup copies the database d (open for writing, so that no other writer
// changes it meanwhile) and everything in its retained-input store into
// the folder out, which must not exist or be empty (else a usage error,
// exit 2): the database file, checkpointed, as out/<name>, the store as
// out/<name>.inputs/, and out/manifest.json, written last. The folder is
// built beside out under a partial name and renamed to out once complete
// and synced, so out is a whole backup or absent; a killed backup's partial
// folder is removed by the next backup to out. Target, ledger and progress
// are one file, so they are copied together.
func Backup(ctx context.Context, d *run.DB, out string, opts BackupOptions) (_ *BackupResult, err error) {
	fault := func(point string) {
		if opts.Fault != nil {
			opts.Fault(point)
		}
	}
	if d.ReadOnly() {
		return nil, fmt.Errorf("backup %s: the database is open read-only", d.Path())
	}
	start := time.Now()
	if out == "" {
		return nil, report.Usage("backup needs --out DIR")
	}
	out = filepath.Clean(out)
	if err := emptyOrMissing(out); err != nil {
		return nil, err
	}
	abs, aerr := filepath.Abs(out)
	dbDir, derr := filepath.Abs(filepath.Dir(d.Path()))
	if aerr == nil && derr == nil && strings.HasPrefix(abs+string(filepath.Separator), source.StoreDir(filepath.Join(dbDir, filepath.Base(d.Path())))+string(filepath.Separator)) {
		return nil, report.Usage("backup folder %s is inside the retained-input store of %s", out, d.Path())
	}
	if err := d.Checkpoint(ctx); err != nil {
		return nil, err
	}
	m := &BackupManifest{Format: backupFormat, Database: filepath.Base(d.Path()), CreatedAt: time.Now().UTC().Truncate(time.Second)}
	if m.DatabaseID, m.Commit, err = catalog.CommitPoint(ctx, d.SQL()); err != nil {
		return nil, err
	}
	partial, err := run.NewPartialDir(out)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			_ = os.RemoveAll(partial)
		}
	}()
	dbCopy := filepath.Join(partial, m.Database)
	if _, err := d.CopyFileTo(dbCopy); err != nil {
		return nil, err
	}
	sum, size, err := source.SumFile(ctx, dbCopy, nil)
	if err != nil {
		return nil, fmt.Errorf("backup %s: %w", d.Path(), err)
	}
	m.Files = append(m.Files, BackupFile{Path: m.Database, Bytes: size, SHA256: sum})
	fault(run.FaultBackupCopied)
	inputs, err := copyStore(ctx, source.StoreDir(d.Path()), filepath.Join(partial, m.Database+".inputs"), m.Database+".inputs")
	if err != nil {
		return nil, fmt.Errorf("backup %s: %w", d.Path(), err)
	}
	m.Files = append(m.Files, inputs...)
	fault(run.FaultBackupBeforeManifest)
	if err := writeManifest(partial, m); err != nil {
		return nil, fmt.Errorf("backup %s: %w", d.Path(), err)
	}
	if err := run.SyncTree(partial); err != nil {
		return nil, fmt.Errorf("backup %s: %w", d.Path(), err)
	}
	fault(run.FaultBackupBeforeRename)
	// rename(2) replaces an empty folder.
	if err := os.Rename(partial, out); err != nil {
		return nil, fmt.Errorf("backup %s: %w", d.Path(), err)
	}
	if err := run.SyncDir(filepath.Dir(out)); err != nil {
		return nil, fmt.Errorf("backup %s: %w", d.Path(), err)
	}
	res := summarize(out, m)
	res.Seconds = time.Since(start).Seconds()
	return res, nil
}

func summarize(dir string, m *BackupManifest) *BackupResult {
	res := &BackupResult{Dir: dir, Database: m.Database, DatabaseID: m.DatabaseID, Commit: m.Commit, Files: len(m.Files)}
	for _, f := range m.Files {
		res.Bytes += f.Bytes
	}
	return res
}

// emptyOrMissing refuses (exit 2) a backup folder that exists and holds
// anything, or is not a folder.
func emptyOrMissing(out string) error {
	st, err := os.Stat(out)
	if errors.Is(err, fs.ErrNotExist) {
		if pst, perr := os.Stat(filepath.Dir(out)); perr != nil || !pst.IsDir() {
			return report.Usage("backup folder %s: folder %s does not exist", out, filepath.Dir(out))
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("backup folder %s: %w", out, err)
	}
	if !st.IsDir() {
		return report.Usage("backup folder %s exists and is not a folder", out)
	}
	entries, err := os.ReadDir(out)
	if err != nil {
		return fmt.Errorf("backup folder %s: %w", out, err)
	}
	if len(entries) > 0 {
		return report.Usage("backup folder %s is not empty: a backup goes into a new or empty folder", out)
	}
	return nil
}

// copyStore copies every file under the retained-input store src into
// dst, syncing each, and returns them with paths under prefix. A retained
// input is named by its sha256: a copy whose bytes do not have it is an
// error (the retained file was damaged). Temporary files are left out.
func copyStore(ctx context.Context, src, dst, prefix string) ([]BackupFile, error) {
	if _, err := os.Lstat(src); errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	var files []BackupFile
	err := filepath.WalkDir(src, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		to := filepath.Join(dst, rel)
		if e.IsDir() {
			return os.MkdirAll(to, 0o755)
		}
		if !e.Type().IsRegular() || strings.HasPrefix(e.Name(), ".") {
			return nil // temporary files (.idem-tmp-*) are no part of the store
		}
		sum, size, err := copyHashed(p, to)
		if err != nil {
			return err
		}
		if isSHA256(e.Name()) && sum != e.Name() {
			return fmt.Errorf("retained input %s does not have the sha256 it is named by (it has %s)", p, sum)
		}
		files = append(files, BackupFile{Path: filepath.ToSlash(filepath.Join(prefix, rel)), Bytes: size, SHA256: sum})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("copy retained inputs %s: %w", src, err)
	}
	return files, nil
}

func isSHA256(s string) bool {
	if len(s) != 64 {
		return false
	}
	_, err := hex.DecodeString(s)
	return err == nil && strings.ToLower(s) == s
}

// copyHashed copies src to the new file dst, syncs it and returns the
// sha256 and size of the bytes written.
func copyHashed(src, dst string) (string, int64, error) {
	in, err := os.Open(src)
	if err != nil {
		return "", 0, err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return "", 0, err
	}
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(out, h), in)
	if err == nil {
		err = out.Sync()
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return "", 0, err
	}
	return hex.EncodeToString(h.Sum(nil)), n, nil
}

// writeManifest writes dir/manifest.json through a temporary name, synced.
func writeManifest(dir string, m *BackupManifest) error {
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	tmp := filepath.Join(dir, "."+BackupManifestName+".tmp")
	if err := os.WriteFile(tmp, append(b, '\n'), 0o644); err != nil {
		return err
	}
	if err := run.SyncFile(tmp); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(dir, BackupManifestName))
}

// VerifyBackup checks the backup folder dir against its manifest: every
// file it lists is there with its size and sha256, and no other file is.
// A folder without a manifest is not a backup (a killed backup's folder
// never is at the name asked for). Any difference is an error naming the
// first file that differs.
func VerifyBackup(ctx context.Context, dir string) (*BackupResult, error) {
	start := time.Now()
	b, err := os.ReadFile(filepath.Join(dir, BackupManifestName))
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, report.Fatal(fmt.Errorf("verify backup %s: no %s: it is not a complete backup", dir, BackupManifestName))
		}
		return nil, fmt.Errorf("verify backup %s: %w", dir, err)
	}
	var m BackupManifest
	if err := json.Unmarshal(b, &m); err != nil || m.Format != backupFormat {
		return nil, report.Fatal(fmt.Errorf("verify backup %s: %s is not an idem backup manifest (%s)", dir, BackupManifestName, backupFormat))
	}
	// The manifest names its database file, a plain name, and lists it.
	if m.Database == "" || m.Database != filepath.Base(m.Database) || !slices.ContainsFunc(m.Files, func(f BackupFile) bool { return f.Path == m.Database }) {
		return nil, report.Fatal(fmt.Errorf("verify backup %s: the manifest does not list its database file %q: it is not a complete backup", dir, m.Database))
	}
	listed := map[string]bool{BackupManifestName: true}
	for _, f := range m.Files {
		if !filepath.IsLocal(filepath.FromSlash(f.Path)) {
			return nil, report.Fatal(fmt.Errorf("verify backup %s: the manifest names %s, outside the folder", dir, f.Path))
		}
		listed[f.Path] = true
		// A backup holds copies: a symbolic link (to the live database,
		// say) would change with what it points to.
		if st, err := os.Lstat(filepath.Join(dir, filepath.FromSlash(f.Path))); err == nil && !st.Mode().IsRegular() {
			return nil, report.Fatal(fmt.Errorf("verify backup %s: %s is not a regular file (%s): a backup holds copies", dir, f.Path, st.Mode().Type()))
		}
		sum, size, err := source.SumFile(ctx, filepath.Join(dir, filepath.FromSlash(f.Path)), nil)
		if err != nil {
			return nil, report.Fatal(fmt.Errorf("verify backup %s: %w", dir, err))
		}
		if size != f.Bytes || sum != f.SHA256 {
			return nil, report.Fatal(fmt.Errorf("verify backup %s: %s has %d bytes, sha256 %s; the manifest says %d bytes, sha256 %s", dir, f.Path, size, sum, f.Bytes, f.SHA256))
		}
	}
	var extra []string
	err = filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err == nil && !listed[filepath.ToSlash(rel)] {
			extra = append(extra, filepath.ToSlash(rel))
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("verify backup %s: %w", dir, err)
	}
	if len(extra) > 0 {
		slices.Sort(extra)
		return nil, report.Fatal(fmt.Errorf("verify backup %s: %s is not in the manifest", dir, extra[0]))
	}
	// The database file is the one the manifest names: its id and commit
	// are the manifest's.
	id, commit, err := backupCommitPoint(ctx, filepath.Join(dir, m.Database))
	if err != nil {
		return nil, report.Fatal(fmt.Errorf("verify backup %s: %s: %w", dir, m.Database, err))
	}
	if id != m.DatabaseID || commit != m.Commit {
		return nil, report.Fatal(fmt.Errorf("verify backup %s: %s is database %s at commit %d; the manifest says database %s at commit %d", dir, m.Database, id, commit, m.DatabaseID, m.Commit))
	}
	res := summarize(dir, &m)
	res.Seconds = time.Since(start).Seconds()
	return res, nil
}

// backupCommitPoint reads the database id and last commit of a database
// file without opening it as idem does (no sweep, no migration): attached
// read-only to an in-memory DuckDB, on one connection that uses it.
func backupCommitPoint(ctx context.Context, path string) (string, int64, error) {
	db, err := run.OpenMemory(ctx, "?threads=1&autoinstall_known_extensions=false")
	if err != nil {
		return "", 0, err
	}
	defer db.Close()
	conn, err := db.Conn(ctx)
	if err != nil {
		return "", 0, err
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "ATTACH "+sqltext.SQLString(path)+" AS idem_backup (READ_ONLY)"); err != nil {
		return "", 0, fmt.Errorf("open: %w", catalog.TrimSQLError(err))
	}
	if _, err := conn.ExecContext(ctx, "USE idem_backup"); err != nil {
		return "", 0, fmt.Errorf("open: %w", catalog.TrimSQLError(err))
	}
	return catalog.CommitPoint(ctx, conn)
}
