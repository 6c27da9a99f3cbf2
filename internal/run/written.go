package run

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	"github.com/idem-dev/idem/internal/catalog"
	"github.com/idem-dev/idem/internal/job"
	"github.com/idem-dev/idem/internal/pipeline"
	"github.com/idem-dev/idem/internal/sqltext"
)

// countWritten sets what a committing run wrote, once the target and its
// history hold snapshot S: RowsWritten and Conflicts.
//
// A refresh writes the whole target, so RowsWritten is the target's row
// count. An apply run counts the distinct keys its commit step named in
// idem_touched: the target rows the batch inserted, updated or deleted (a
// conflict it stored included; a duplicate or stale row, which writes
// nothing, not). A pipeline that leaves no idem_touched is counted on its
// history: the distinct keys whose rows opened or closed at S, or, without
// key columns, the rows that did. touchedKeys >= 0 is the count of
// idem_touched's distinct keys that recording history already made
// (catalog.RecordHistory), so idem_touched is not read twice.
func countWritten(ctx context.Context, tx *sql.Tx, j *job.Job, snapshot, touchedKeys int64, res *Result) error {
	res.RowsWritten = res.RowsOut
	switch {
	case j.Pipeline.Mode != pipeline.ModeApply:
	case touchedKeys >= 0:
		res.RowsWritten = touchedKeys
	default:
		touched, err := catalog.TableExists(ctx, tx, "temp", "idem_touched")
		if err != nil {
			return err
		}
		keys := make([]string, len(j.Pipeline.Key))
		for i, k := range j.Pipeline.Key {
			keys[i] = sqltext.QuoteIdent(k)
		}
		var q string
		switch {
		case touched && len(keys) > 0:
			q = "SELECT count(*) FROM (SELECT DISTINCT " + strings.Join(keys, ", ") + " FROM idem_touched)"
		case len(keys) > 0:
			q = "SELECT count(*) FROM (SELECT DISTINCT " + strings.Join(keys, ", ") + " FROM " + catalog.HistoryTable(j.Name) + " WHERE idem_from = ? OR idem_to = ?)"
		default:
			q = "SELECT count(*) FROM " + catalog.HistoryTable(j.Name) + " WHERE idem_from = ? OR idem_to = ?"
		}
		var args []any
		if strings.Contains(q, "?") {
			args = []any{snapshot, snapshot}
		}
		if err := tx.QueryRowContext(ctx, q, args...).Scan(&res.RowsWritten); err != nil {
			return fmt.Errorf("count rows written to %s: %w", j.Table, catalog.TrimSQLError(err))
		}
	}
	if c := j.Pipeline.ConflictColumn; c != "" {
		var n int64
		if err := tx.QueryRowContext(ctx, "SELECT count(*) FROM "+sqltext.QuoteIdent(j.Table)+" WHERE "+sqltext.QuoteIdent(c)+" = 'conflict'").Scan(&n); err != nil {
			return fmt.Errorf("count conflicts in %s: %w", j.Table, catalog.TrimSQLError(err))
		}
		res.Conflicts = &n
	}
	return nil
}
