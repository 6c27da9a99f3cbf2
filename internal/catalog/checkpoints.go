package catalog

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/idem-dev/idem/internal/job"
	"github.com/idem-dev/idem/internal/jobkey"
	"github.com/idem-dev/idem/internal/sqltext"
)

// Checkpoints: an image of a job's state at one snapshot, from which a
// rerun replays only the snapshots after it. Its files are Parquet files in
// the retained-input store (recorded in idem.inputs like any retained
// input); idem.checkpoints names them, and its sha256 is that of the
// checkpoint's manifest (CheckpointManifest), itself a file in the store.

// CheckpointFile is one file of a checkpoint: Part says what it holds,
// "target" (the target's rows) or "idem.<table>" (the job's rows of one of
// idem's tables).
type CheckpointFile struct {
	Part   string `json:"part"`
	SHA256 string `json:"sha256"`
	Bytes  int64  `json:"bytes"`
}

// Checkpoint is one idem.checkpoints row.
type Checkpoint struct {
	Job      string
	Snapshot int64
	SHA256   string // the manifest's sha256: the checkpoint's id
	Bytes    int64  // the files' bytes, the manifest's included
	Files    []CheckpointFile
}

// CheckpointTables are the idem tables whose rows of the job a checkpoint
// keeps: what a run after it reads (state row, ledger, erasures, files,
// owners) and what a replayed rollback reads (snapshot rows).
var CheckpointTables = []string{"jobs", "ledger", "snapshots", "erasures", "files", "owners"}

// CheckpointManifest is the manifest of a checkpoint: canonical JSON of the
// job, the snapshot and the files. Its sha256 is the checkpoint's id.
func CheckpointManifest(jobName string, snapshot int64, files []CheckpointFile) []byte {
	list := make([]any, len(files))
	for i, f := range files {
		list[i] = map[string]any{"part": f.Part, "sha256": f.SHA256, "bytes": f.Bytes}
	}
	return jobkey.CanonicalJSON(map[string]any{"job": jobName, "snapshot": snapshot, "files": list})
}

// CopyIdemRows writes the job's rows of idem.<table> (one of
// CheckpointTables) to a Parquet file, inside the caller's transaction.
func CopyIdemRows(ctx context.Context, q Querier, table, jobName, out string) error {
	if !isCheckpointTable(table) {
		return fmt.Errorf("checkpoint: idem.%s is not a checkpointed table", table)
	}
	cols := "*"
	if table == "snapshots" {
		// A checkpoint keeps no release packet (its key bounds are values
		// an erasure scrubs in idem.snapshots, not in checkpoint files),
		// as before packets were a column of the snapshot row.
		cols = "* EXCLUDE (packet)"
	}
	_, err := q.ExecContext(ctx, "COPY (SELECT "+cols+" FROM idem."+sqltext.QuoteIdent(table)+" WHERE job = "+sqltext.SQLString(jobName)+" ORDER BY ALL) TO "+sqltext.SQLString(out)+" (FORMAT parquet)")
	if err != nil {
		return fmt.Errorf("checkpoint idem.%s of %s: %w", table, jobName, TrimSQLError(err))
	}
	return nil
}

// LoadIdemRows inserts the rows of a Parquet file CopyIdemRows wrote into
// idem.<table>.
func LoadIdemRows(ctx context.Context, q Querier, table, path string) error {
	if !isCheckpointTable(table) {
		return fmt.Errorf("checkpoint: idem.%s is not a checkpointed table", table)
	}
	if _, err := q.ExecContext(ctx, "INSERT INTO idem."+sqltext.QuoteIdent(table)+" BY NAME SELECT * FROM read_parquet("+sqltext.SQLString(path)+")"); err != nil {
		return fmt.Errorf("load idem.%s from checkpoint: %w", table, TrimSQLError(err))
	}
	return nil
}

func isCheckpointTable(t string) bool {
	for _, c := range CheckpointTables {
		if c == t {
			return true
		}
	}
	return false
}

// SettleCheckpoint finishes the load of a checkpoint of snapshot into a
// scratch database: it creates the job's history holding the target's rows
// as open rows from snapshot on (what pinned reads at or after it need),
// and sets the snapshot row's row count to the target's, as a replay would
// have counted it (an erasure since may have removed rows from the
// checkpoint's target, not from its snapshot rows). The loaded snapshot
// rows name no input file: their inputs are in the other database's store,
// and a replayed erasure must not look for them in this one's.
func SettleCheckpoint(ctx context.Context, q Querier, j *job.Job, snapshot int64) error {
	target := sqltext.QuoteIdent(j.Table)
	for _, stmt := range []string{
		"CREATE OR REPLACE TABLE " + HistoryTable(j.Name) + " AS SELECT *, CAST(" + fmt.Sprint(snapshot) + " AS BIGINT) AS idem_from, CAST(NULL AS BIGINT) AS idem_to FROM " + target,
		"UPDATE idem.snapshots SET inputs = json_merge_patch(inputs, '{\"files\": []}') WHERE job = " + sqltext.SQLString(j.Name) + " AND inputs IS NOT NULL",
		"UPDATE idem.snapshots SET rows_out = (SELECT count(*) FROM " + target + ") WHERE job = " + sqltext.SQLString(j.Name) + " AND snapshot = " + fmt.Sprint(snapshot),
	} {
		if _, err := q.ExecContext(ctx, stmt); err != nil {
			return fmt.Errorf("load checkpoint %d of %s: %w", snapshot, j.Name, TrimSQLError(err))
		}
	}
	return nil
}

// RecordCheckpoint writes the checkpoint's idem.checkpoints row, in the
// transaction of the snapshot it images.
func RecordCheckpoint(ctx context.Context, q Querier, c Checkpoint) error {
	files, err := json.Marshal(c.Files)
	if err != nil {
		return err
	}
	if _, err := q.ExecContext(ctx, `INSERT INTO idem.checkpoints (job, snapshot, sha256, bytes, files, created_at) VALUES (?, ?, ?, ?, ?, current_timestamp)`,
		c.Job, c.Snapshot, c.SHA256, c.Bytes, string(files)); err != nil {
		return fmt.Errorf("record checkpoint %d of %s: %w", c.Snapshot, c.Job, err)
	}
	return nil
}

// ReplaceCheckpoint points the checkpoint of c.Job at c.Snapshot at new
// files (an erasure rewrote them).
func ReplaceCheckpoint(ctx context.Context, q Querier, c Checkpoint) error {
	files, err := json.Marshal(c.Files)
	if err != nil {
		return err
	}
	if _, err := q.ExecContext(ctx, `UPDATE idem.checkpoints SET sha256 = ?, bytes = ?, files = ? WHERE job = ? AND snapshot = ?`,
		c.SHA256, c.Bytes, string(files), c.Job, c.Snapshot); err != nil {
		return fmt.Errorf("update checkpoint %d of %s: %w", c.Snapshot, c.Job, err)
	}
	return nil
}

// DeleteCheckpoint deletes the job's checkpoint row of snapshot. Its files
// stay recorded in idem.inputs: the caller forgets those that no other
// checkpoint names (CheckpointReferences).
func DeleteCheckpoint(ctx context.Context, q Querier, jobName string, snapshot int64) error {
	if _, err := q.ExecContext(ctx, `DELETE FROM idem.checkpoints WHERE job = ? AND snapshot = ?`, jobName, snapshot); err != nil {
		return fmt.Errorf("delete checkpoint %d of %s: %w", snapshot, jobName, err)
	}
	return nil
}

// CheckpointReferences counts the checkpoint rows that name the stored
// file sum (as a file or as their manifest).
func CheckpointReferences(ctx context.Context, q Querier, sum string) (int, error) {
	var n int
	err := q.QueryRowContext(ctx, `SELECT count(*) FROM idem.checkpoints WHERE sha256 = ? OR contains(files, ?)`, sum, sum).Scan(&n)
	return n, err
}

// Checkpoints lists the job's checkpoints, oldest first.
func Checkpoints(ctx context.Context, q Querier, jobName string) ([]*Checkpoint, error) {
	return readCheckpoints(ctx, q, `SELECT job, snapshot, sha256, bytes, files FROM idem.checkpoints WHERE job = ? ORDER BY snapshot`, jobName)
}

func readCheckpoints(ctx context.Context, q Querier, query string, args ...any) ([]*Checkpoint, error) {
	// A database from before idem.checkpoints, opened read-only (not
	// migrated), has none.
	if ok, err := TableExists(ctx, q, "idem", "checkpoints"); err != nil || !ok {
		return nil, err
	}
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("read checkpoints: %w", err)
	}
	defer rows.Close()
	var out []*Checkpoint
	for rows.Next() {
		c := &Checkpoint{}
		var files sql.NullString
		if err := rows.Scan(&c.Job, &c.Snapshot, &c.SHA256, &c.Bytes, &files); err != nil {
			return nil, err
		}
		if err := json.Unmarshal([]byte(files.String), &c.Files); err != nil {
			return nil, errors.Join(fmt.Errorf("checkpoint %d of %s: files", c.Snapshot, c.Job), err)
		}
		out = append(out, c)
	}
	return out, rows.Err()
}
