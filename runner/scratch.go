package runner

import (
	"context"
	"database/sql"
	"fmt"
)

// keptTemp are the temp tables a run still reads once the outcomes are
// counted: idem_touched for history, and idem's own erasure list.
var keptTemp = map[string]bool{"idem_touched": true, "idem_erased": true}

// dropScratch drops the temp tables the steps left once the run has counted
// the outcomes (staged, outcomes and a pipeline's intermediate results):
// left in place, COMMIT carries them and their memory stays taken through
// the history update.
func dropScratch(ctx context.Context, tx *sql.Tx) error {
	rows, err := tx.QueryContext(ctx, `SELECT table_name FROM duckdb_tables() WHERE database_name = 'temp' ORDER BY table_name`)
	if err != nil {
		return fmt.Errorf("list temp tables: %w", err)
	}
	var drop []string
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			rows.Close()
			return err
		}
		if !keptTemp[name] {
			drop = append(drop, name)
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	for _, name := range drop {
		if _, err := tx.ExecContext(ctx, "DROP TABLE temp.main."+quoteIdent(name)); err != nil {
			return fmt.Errorf("drop temp table %s: %w", name, err)
		}
	}
	return nil
}
