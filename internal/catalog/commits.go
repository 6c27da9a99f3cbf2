package catalog

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/idem-dev/idem/internal/job"
)

// RecordCommit adds the row of one committing transaction to idem.commits:
// the database's own id (written when it was created) and the next
// sequence number. A WAL replays its rows as they were written, so a WAL
// of another database brings rows with another id, and a WAL of an older
// state of this one brings a sequence number already taken, and one of a
// copy that went on committing alone skips numbers; checkWAL refuses them.
func RecordCommit(ctx context.Context, tx *sql.Tx, j, kind string) error {
	_, err := tx.ExecContext(ctx, `INSERT INTO idem.commits (db_id, seq, job, kind, committed_at)
		SELECT db_id, (SELECT max(seq) FROM idem.commits) + 1, ?, ?, current_timestamp FROM idem.commits WHERE seq = 0`, j, kind)
	if err != nil {
		return fmt.Errorf("record commit: %w", err)
	}
	return nil
}

// CheckWAL refuses a database whose WAL, replayed when it was opened,
// brought commits of another database or of an older copy of this one. It
// runs on a read-only open, so the replay has changed nothing on disk.
func CheckWAL(ctx context.Context, q Querier, path, wal string) error {
	exists, err := TableExists(ctx, q, "idem", "commits")
	if err != nil || !exists {
		return err
	}
	// One id, and sequence numbers 0..n without a gap or a repeat: a WAL
	// of a copy that went on alone leaves a gap, one of an older state a
	// repeat.
	var ids int64
	var ok bool
	if err := q.QueryRowContext(ctx, `SELECT count(DISTINCT db_id),
		count(DISTINCT seq) = count(*) AND coalesce(min(seq), 0) = 0 AND coalesce(max(seq), -1) + 1 = count(*) FROM idem.commits`).Scan(&ids, &ok); err != nil {
		return fmt.Errorf("check WAL of %s: %w", path, err)
	}
	if ids > 1 || !ok {
		return job.Refuse("wal", "%s does not belong to database %s: it holds commits made in another database or in an older copy of this one, "+
			"and replaying it would apply them here; nothing was written. Move %s away (keep it if it may belong elsewhere) and run again",
			wal, path, wal)
	}
	return nil
}
