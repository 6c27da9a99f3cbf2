package catalog

import (
	"context"
	"fmt"

	"github.com/idem-dev/idem/internal/report"
)

// The commit log: every committing transaction writes one run log row
// (InsertRun with RunRow.Commit) that carries the database's own id
// (idem.meta's db_id, written when it was created) and the next commit
// sequence number; idem.commits is a view of those rows, with row 0 the
// database's creation (catalog version 9). A WAL replays its rows as they
// were written, so a WAL of another database brings rows with another id,
// and a WAL of an older state of this one brings a sequence number already
// taken, and one of a copy that went on committing alone skips numbers;
// CheckWAL refuses them.
//
// The next number is read from idem.runs itself, where every number after
// row 0 is: binding the view (its creation row's TRY_CAST and subquery)
// cost about 1 ms more of every commit, a third of the statement.
const commitInsert = `INSERT INTO idem.runs (job, run_at, batch_id, decision, changed, rows_in, outcomes, snapshot, cursor, epoch, message, seq, db_id)
	VALUES (?, coalesce(CAST(? AS TIMESTAMP), current_timestamp), ?, ?, ?, ?, ?, ?, ?, ?, ?,
		(SELECT coalesce(max(seq), 0) FROM idem.runs) + 1, (SELECT value FROM idem.meta WHERE key = 'db_id'))`

// CheckWAL refuses a database whose WAL, replayed when it was opened,
// brought commits of another database or of an older copy of this one. It
// runs on a read-only open, so the replay has changed nothing on disk.
func CheckWAL(ctx context.Context, q Querier, path, wal string) error {
	// idem.commits is a table before catalog version 9, a view since.
	var exists bool
	if err := q.QueryRowContext(ctx, `SELECT count(*) > 0 FROM (
		SELECT 1 FROM duckdb_tables() WHERE database_name = current_database() AND schema_name = 'idem' AND table_name = 'commits'
		UNION ALL
		SELECT 1 FROM duckdb_views() WHERE database_name = current_database() AND schema_name = 'idem' AND view_name = 'commits')`).Scan(&exists); err != nil || !exists {
		if err != nil {
			return fmt.Errorf("check WAL of %s: %w", path, err)
		}
		return nil
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
		return report.Refuse("wal", "%s does not belong to database %s: it holds commits made in another database or in an older copy of this one, "+
			"and replaying it would apply them here; nothing was written. Move %s away (keep it if it may belong elsewhere) and run again",
			wal, path, wal)
	}
	return nil
}
