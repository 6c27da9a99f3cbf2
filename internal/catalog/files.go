package catalog

import (
	"context"
	"database/sql"
	"fmt"
	"path"
)

type FileRecord struct {
	SHA256, BatchID string
	Snapshot        int64
}

// CommittedFiles reads the job's file records by file name, oldest first.
func CommittedFiles(ctx context.Context, q Querier, j string) (map[string][]FileRecord, error) {
	rows, err := q.QueryContext(ctx, `SELECT path, sha256, batch_id, snapshot FROM idem.files WHERE job = ? ORDER BY snapshot, path`, j)
	if err != nil {
		return nil, fmt.Errorf("read committed files of job %s: %w", j, err)
	}
	defer rows.Close()
	out := map[string][]FileRecord{}
	for rows.Next() {
		var p string
		var r FileRecord
		if err := rows.Scan(&p, &r.SHA256, &r.BatchID, &r.Snapshot); err != nil {
			return nil, err
		}
		name := path.Base(p)
		out[name] = append(out[name], r)
	}
	return out, rows.Err()
}

// CommittedFile reads the job's records of the file named name, oldest
// first, inside the run's transaction.
func CommittedFile(ctx context.Context, tx *sql.Tx, j, name string) ([]FileRecord, error) {
	rows, err := tx.QueryContext(ctx, `SELECT sha256, batch_id, snapshot FROM idem.files WHERE job = ? AND (path = ? OR ends_with(path, ?)) ORDER BY snapshot, path`, j, name, "/"+name)
	if err != nil {
		return nil, fmt.Errorf("read committed files of job %s: %w", j, err)
	}
	defer rows.Close()
	var out []FileRecord
	for rows.Next() {
		var r FileRecord
		if err := rows.Scan(&r.SHA256, &r.BatchID, &r.Snapshot); err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// RecordFile records a committed file of a files-mode job.
func RecordFile(ctx context.Context, q Querier, j, path, sum string, size int64, batchID string, snapshot int64) error {
	_, err := q.ExecContext(ctx, `INSERT INTO idem.files (job, path, sha256, bytes, batch_id, snapshot, committed_at) VALUES (?, ?, ?, ?, ?, ?, current_timestamp)`,
		j, path, sum, size, batchID, snapshot)
	return err
}
