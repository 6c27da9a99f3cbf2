package catalog

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	"github.com/idem-dev/idem/internal/sqltext"
)

// What a run's history reads beside its target: which of its tables exist
// (the history table, the steps' idem_touched, idem_replaced), and the keys
// idem itself deleted before the steps (idem_replaced), merged into the
// steps' touched keys before history is recorded (history.go).

// RunTables says which of the tables a run's history reads exist: the
// job's history table, and the temp tables idem_touched (the steps' keys)
// and idem_replaced (the keys idem deleted before them, noteReplaced).
type RunTables struct{ History, Touched, Replaced bool }

// ReadRunTables looks the RunTables of job j up in one statement (listing
// tables costs about 8 us a table of the database, and a statement about
// 0.4 ms however small: a run looked each up apart).
func ReadRunTables(ctx context.Context, q Querier, j string) (RunTables, error) {
	var t RunTables
	err := q.QueryRowContext(ctx, `SELECT
		count(*) FILTER (WHERE database_name = current_database() AND schema_name = 'idem' AND table_name = ?) > 0,
		count(*) FILTER (WHERE database_name = 'temp' AND table_name = 'idem_touched') > 0,
		count(*) FILTER (WHERE database_name = 'temp' AND table_name = 'idem_replaced') > 0
		FROM duckdb_tables()`, j+"__history").Scan(&t.History, &t.Touched, &t.Replaced)
	if err != nil {
		return t, fmt.Errorf("look up the history tables of %s: %w", j, err)
	}
	return t, nil
}

// noteReplaced records, in temp table idem_replaced, the keys of the rows
// of target (quoted) that match where ("" every row) before idem itself
// deletes them in a run (a reference table replaced whole, a job realigned
// with a rolled-back upstream): the steps' idem_touched names only the
// keys they wrote, and history must close the deleted ones too
// (MergeReplaced).
func noteReplaced(ctx context.Context, tx *sql.Tx, target string, keys []string, where string) error {
	cols := make([]string, len(keys))
	for i, k := range keys {
		cols[i] = "t." + sqltext.QuoteIdent(k)
	}
	sel := "SELECT " + strings.Join(cols, ", ") + " FROM " + target + " AS t"
	if where != "" {
		sel += " WHERE " + where
	}
	exists, err := TableExists(ctx, tx, "temp", "idem_replaced")
	if err != nil {
		return err
	}
	q := "CREATE TEMP TABLE idem_replaced AS " + sel
	if exists {
		q = "INSERT INTO idem_replaced " + sel
	}
	if _, err := tx.ExecContext(ctx, q); err != nil {
		return fmt.Errorf("note the keys replaced in %s: %w", target, TrimSQLError(err))
	}
	return nil
}

// MergeReplaced adds the keys noteReplaced recorded to the steps'
// idem_touched (when the steps made one: otherwise history compares the
// whole target) and drops idem_replaced; tables are as ReadRunTables found
// them.
func MergeReplaced(ctx context.Context, tx *sql.Tx, tables RunTables) error {
	if !tables.Replaced {
		return nil
	}
	if tables.Touched {
		if _, err := tx.ExecContext(ctx, "INSERT INTO idem_touched BY NAME SELECT * FROM idem_replaced"); err != nil {
			return fmt.Errorf("history: the keys replaced: %w", TrimSQLError(err))
		}
	}
	_, err := tx.ExecContext(ctx, "DROP TABLE idem_replaced")
	return err
}

// DeleteKeyedRows deletes, in a run before its steps, the rows of target
// (and of its <target>_tombstones) that match where ("" every row), noting
// the target's keys for history first (noteReplaced). A table that does not
// exist is passed over.
func DeleteKeyedRows(ctx context.Context, tx *sql.Tx, target string, keys []string, where string) error {
	for i, table := range []string{target, target + "_tombstones"} {
		ok, err := TableExists(ctx, tx, "main", table)
		if err != nil {
			return err
		}
		if !ok {
			continue
		}
		quoted := "main." + sqltext.QuoteIdent(table)
		if i == 0 {
			if err := noteReplaced(ctx, tx, quoted, keys, where); err != nil {
				return err
			}
		}
		q := "DELETE FROM " + quoted + " AS t"
		if where != "" {
			q += " WHERE " + where
		}
		if _, err := tx.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("delete from %s: %w", table, TrimSQLError(err))
		}
	}
	return nil
}
