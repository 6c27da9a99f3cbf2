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

// ClosedHistoryRows counts the history rows of job j that ExpireHistory
// deletes, by the snapshot from which no read selects them: ExpireHistory
// for oldest kept K deletes the rows of every S <= K. A closed row (or
// marker) ends at its idem_to; in a history of appended rows, a row that a
// later row of its key supersedes ends where that row begins.
func ClosedHistoryRows(ctx context.Context, q Querier, j string) (byClose map[int64]int64, err error) {
	byClose = map[int64]int64{}
	exists, err := TableExists(ctx, q, "idem", j+"__history")
	if err != nil || !exists {
		return byClose, err
	}
	f, err := readHistoryFormat(ctx, q, j)
	if err != nil {
		return nil, err
	}
	hist := HistoryTable(j)
	query := "SELECT idem_to AS idem_end, count(*) FROM " + hist + " WHERE idem_to IS NOT NULL GROUP BY idem_end"
	if f != nil {
		// The next start of the key after this row's, among the rows
		// appended since f.Since (ExpireHistory's rule).
		keys := strings.Join(quoteAll(f.Key), ", ")
		query = fmt.Sprintf(`SELECT idem_end, count(*) FROM (
	SELECT coalesce(idem_to, min(CASE WHEN idem_from >= %d THEN idem_from END) OVER (PARTITION BY %s ORDER BY idem_from RANGE BETWEEN 1 FOLLOWING AND UNBOUNDED FOLLOWING)) AS idem_end
	FROM %s) WHERE idem_end IS NOT NULL GROUP BY idem_end`, f.Since, keys, hist)
	}
	rows, err := q.QueryContext(ctx, query)
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
