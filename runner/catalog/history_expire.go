package catalog

import (
	"context"
	"database/sql"
	"fmt"
)

// ExpireHistory deletes, in the expiry's transaction tx, the history rows
// of job j that are visible only in snapshots below oldestKept: those
// closed at or before it (idem_to <= oldestKept; a row is valid in
// [idem_from, idem_to)). Every row a pinned read of a kept snapshot, or
// ChangesSelect between two kept snapshots, selects stays. A job without
// history has nothing to delete.
func ExpireHistory(ctx context.Context, tx *sql.Tx, j string, oldestKept int64) error {
	exists, err := TableExists(ctx, tx, "idem", j+"__history")
	if err != nil || !exists {
		return err
	}
	if _, err := tx.ExecContext(ctx, "DELETE FROM "+HistoryTable(j)+" WHERE idem_to IS NOT NULL AND idem_to <= ?", oldestKept); err != nil {
		return fmt.Errorf("expire history of %s: %w", j, TrimSQLError(err))
	}
	return nil
}

// ClosedHistoryRows counts the closed history rows of job j by the
// snapshot that closed them (idem_to): ExpireHistory for oldest kept K
// deletes the rows of every S <= K.
func ClosedHistoryRows(ctx context.Context, q Querier, j string) (byClose map[int64]int64, err error) {
	byClose = map[int64]int64{}
	exists, err := TableExists(ctx, q, "idem", j+"__history")
	if err != nil || !exists {
		return byClose, err
	}
	rows, err := q.QueryContext(ctx, "SELECT idem_to, count(*) FROM "+HistoryTable(j)+" WHERE idem_to IS NOT NULL GROUP BY idem_to")
	if err != nil {
		return nil, fmt.Errorf("read history of %s: %w", j, TrimSQLError(err))
	}
	defer rows.Close()
	for rows.Next() {
		var s, n int64
		if err := rows.Scan(&s, &n); err != nil {
			return nil, err
		}
		byClose[s] = n
	}
	return byClose, rows.Err()
}
