package catalog

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
)

// ExpireHistory deletes the history rows of job j that no snapshot at or
// after oldestKept can read: closed rows (and markers) that ended at or
// before it, and, in a history of appended rows (see RecordHistory), the
// rows a later row of their key at or before oldestKept supersedes. Every
// snapshot from oldestKept on reads the same rows as before. A job without
// a history table has nothing to expire.
func ExpireHistory(ctx context.Context, tx *sql.Tx, j string, oldestKept int64) error {
	exists, err := TableExists(ctx, tx, "idem", j+"__history")
	if err != nil || !exists {
		return err
	}
	f, err := readHistoryFormat(ctx, tx, j)
	if err != nil {
		return err
	}
	hist := HistoryTable(j)
	var stmts []string
	if f != nil {
		// Before the markers go: each key's latest appended row at or
		// before oldestKept is valid there or a marker, and every row of
		// the key that began before it ended by then.
		keys := strings.Join(quoteAll(f.Key), ", ")
		stmts = append(stmts, fmt.Sprintf("DELETE FROM %s AS h USING (SELECT %s, max(idem_from) AS idem_last FROM %s WHERE idem_from >= %d AND idem_from <= %d GROUP BY %s) AS l WHERE %s AND h.idem_from < l.idem_last",
			hist, keys, hist, f.Since, oldestKept, keys, keyMatch(f.Key, "h", "l")))
	}
	stmts = append(stmts, fmt.Sprintf("DELETE FROM %s WHERE idem_to <= %d", hist, oldestKept))
	for _, q := range stmts {
		if _, err := tx.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("expire the history of %s before snapshot %d: %w", j, oldestKept, TrimSQLError(err))
		}
	}
	return nil
}
