package runner

import (
	"context"
	"errors"

	"github.com/idem-dev/idem/internal/dbfile"
	"github.com/idem-dev/idem/internal/run"
)

// BackupManifest is the file of a backup folder that lists every other
// file with its sha256.
const BackupManifest = dbfile.BackupManifestName

// BackupResult reports a backup or its verification. The JSON keys are
// those of idem backup --json.
type BackupResult struct {
	// Dir is the backup folder, Database the database it holds, with its
	// id and latest commit sequence.
	Dir        string `json:"dir"`
	Database   string `json:"database"`
	DatabaseID string `json:"database_id"`
	Commit     int64  `json:"commit"`
	// Files and Bytes count what the backup holds, the manifest aside.
	Files   int     `json:"files"`
	Bytes   int64   `json:"bytes"`
	Seconds float64 `json:"seconds"`
}

// CompactResult reports a compaction. The JSON keys are those of idem
// compact --json.
type CompactResult struct {
	Database    string `json:"database"`
	BytesBefore int64  `json:"bytes_before"`
	BytesAfter  int64  `json:"bytes_after"`
	// Commit is the database's latest commit sequence, the same before
	// and after; Tables the tables checked row for row.
	Commit int64 `json:"commit"`
	Tables int   `json:"tables"`
	// Jobs are the latest exports checked, one per job, with the sha256
	// both files gave.
	Jobs    []CompactedJob `json:"jobs"`
	Seconds float64        `json:"seconds"`
	Replica *ReplicaInfo   `json:"replica,omitempty"`
}

// CompactedJob is the latest snapshot of one job, exported from the
// database and from its compacted file with the same sha256.
type CompactedJob struct {
	Job      string `json:"job"`
	Table    string `json:"table"`
	Snapshot int64  `json:"snapshot"`
	Rows     int64  `json:"rows"`
	SHA256   string `json:"sha256"`
}

// openDatabase opens the database file at path for writing with the
// settings opts give (WithDatabase is not theirs to give).
func openDatabase(ctx context.Context, path string, opts []Option) (*Project, *run.DB, error) {
	p := &Project{}
	for _, o := range opts {
		if err := o.apply(&p.s); err != nil {
			return nil, nil, jobError("", err)
		}
	}
	db, err := run.Open(ctx, path, run.OpenOptions{DuckDB: p.s.duckdb, Wait: p.s.wait})
	if err != nil {
		return nil, nil, jobError("", err)
	}
	return p, db, nil
}

// Backup copies the database file at path and its retained-input store
// into the folder out, as idem backup does: out must not exist or be
// empty (ErrUsage). It holds the database for writing meanwhile, so that
// no writer changes it, and writes out/manifest.json last: a folder built
// under a partial name and renamed to out once complete and synced. A
// result returned beside a *CloseError is complete.
func Backup(ctx context.Context, path, out string, opts ...Option) (*BackupResult, error) {
	p, db, err := openDatabase(ctx, path, opts)
	if err != nil {
		return nil, err
	}
	res, err := dbfile.Backup(ctx, db, out, dbfile.BackupOptions{Fault: p.faultFor(db.Path())})
	if err != nil {
		return nil, jobError("", errors.Join(err, db.Close()))
	}
	return (*BackupResult)(res), p.closeWritten("", db)
}

// VerifyBackup checks the backup in folder dir against its manifest: a
// file missing, extra or different is an error (exit 1).
func VerifyBackup(ctx context.Context, dir string) (*BackupResult, error) {
	res, err := dbfile.VerifyBackup(ctx, dir)
	if err != nil {
		return nil, jobError("", err)
	}
	return (*BackupResult)(res), nil
}

// Compact rewrites the database file at path so that the space of
// deleted, expired and erased rows goes back to the file system and no
// byte of an erased row survives in free blocks, as idem compact does. It
// swaps the new file in only once it holds the same rows in every table
// and every job's latest export has the same sha256; a kill leaves the
// old file or the new one.
func Compact(ctx context.Context, path string, opts ...Option) (*CompactResult, error) {
	p, db, err := openDatabase(ctx, path, opts)
	if err != nil {
		return nil, err
	}
	oo := run.OpenOptions{DuckDB: p.s.duckdb, Wait: p.s.wait}
	res, err := dbfile.Compact(ctx, db, dbfile.CompactOptions{Open: oo, Fault: p.faultFor(db.Path())}) // closes db
	if err != nil {
		return nil, jobError("", err)
	}
	var out CompactResult
	return &out, convert(res, &out)
}
