package run

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/idem-dev/idem/internal/catalog"
	"github.com/idem-dev/idem/internal/job"
	"github.com/idem-dev/idem/internal/pipeline"
	"github.com/idem-dev/idem/internal/report"
	"github.com/idem-dev/idem/internal/source"
	"github.com/idem-dev/idem/internal/sqltext"
)

// bindVariables binds the params and idem's own values as DuckDB variables
// that the step SQL reads with getvariable('name').
func bindVariables(ctx context.Context, tx *sql.Tx, j *job.Job, p *Prepared, snapshot int64) error {
	vars := map[string]any{
		"idem_job":      j.Name,
		"idem_batch_id": p.batchID,
		"idem_snapshot": snapshot,
	}
	for k, v := range j.Params {
		vars[k] = v
	}
	for _, k := range report.SortedKeys(vars) {
		if _, err := tx.ExecContext(ctx, "SET VARIABLE "+sqltext.QuoteIdent(k)+" = ?", vars[k]); err != nil {
			return fmt.Errorf("bind %s: %w", k, err)
		}
	}
	return nil
}

// buildTarget runs the schema DDL. For an apply job whose table exists (a
// schema change), the rows are carried over by column name.
func (d *DB) buildTarget(ctx context.Context, tx *sql.Tx, j *job.Job, existed bool) error {
	if j.IsModel() {
		return nil // a model's step creates the target from its SELECT
	}
	carry := existed && j.Pipeline.Mode == pipeline.ModeApply
	if carry {
		if _, err := tx.ExecContext(ctx, "CREATE OR REPLACE TEMP TABLE idem_prev AS SELECT * FROM "+sqltext.QuoteIdent(j.Table)); err != nil {
			return fmt.Errorf("keep rows of %s for the schema change: %w", j.Table, err)
		}
	}
	if err := ExecStatements(ctx, tx, j.Expand(j.DDL)); err != nil {
		return fmt.Errorf("schema v%d of pipeline %s: %w", j.SchemaVersion, j.Pipeline.Name, catalog.TrimSQLError(err))
	}
	if carry {
		cols, err := commonColumns(ctx, tx, j.Table)
		if err != nil {
			return err
		}
		list := strings.Join(cols, ", ")
		if _, err := tx.ExecContext(ctx, "INSERT INTO "+sqltext.QuoteIdent(j.Table)+" ("+list+") SELECT "+list+" FROM idem_prev"); err != nil {
			return fmt.Errorf("carry rows of %s into schema v%d: %w", j.Table, j.SchemaVersion, catalog.TrimSQLError(err))
		}
	}
	return nil
}

func commonColumns(ctx context.Context, tx *sql.Tx, table string) ([]string, error) {
	rows, err := tx.QueryContext(ctx, `
		SELECT c.column_name FROM duckdb_columns() c
		JOIN duckdb_columns() p ON p.column_name = c.column_name
		WHERE c.database_name = current_database() AND c.schema_name = 'main' AND c.table_name = ?
		  AND p.database_name = 'temp' AND p.table_name = 'idem_prev'
		ORDER BY c.column_index`, table)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var cols []string
	for rows.Next() {
		var c string
		if err := rows.Scan(&c); err != nil {
			return nil, err
		}
		cols = append(cols, sqltext.QuoteIdent(c))
	}
	return cols, rows.Err()
}

func stepError(j *job.Job, step pipeline.Step, err error, p *Prepared) error {
	msg := err.Error()
	if strings.Contains(msg, "Malformed JSON") || strings.Contains(msg, "CSV Error") || strings.Contains(msg, "Invalid unicode") ||
		strings.Contains(msg, "Invalid Input Error") || strings.Contains(msg, "Conversion Error") {
		return source.ReadError(err, p.files, p.format)
	}
	return fmt.Errorf("step %s: %w", step.Name, contractError(j, "step "+step.Name, catalog.TrimSQLError(err)))
}

// outcomeCounts counts this run's outcomes: the rows the commit step stored
// in the pipeline's outcomes table when it declares one (in apply mode, the
// rows of this batch), else the steps' outcomes relation. It also says
// where it counted, for messages.
func outcomeCounts(ctx context.Context, tx *sql.Tx, j *job.Job, batchID string) (map[string]int64, string, error) {
	from, where := "outcomes", "in the outcomes relation"
	if t := j.Pipeline.OutcomesTable; t != "" {
		from, where = sqltext.QuoteIdent(j.Table+t), "stored in "+j.Table+t
		if j.Pipeline.Mode == pipeline.ModeApply {
			from += " WHERE batch_id = getvariable('idem_batch_id')"
			where += " for batch " + batchID
		}
	}
	rows, err := tx.QueryContext(ctx, "SELECT outcome, count(*) FROM "+from+" GROUP BY outcome ORDER BY outcome")
	if err != nil {
		return nil, "", fmt.Errorf("count outcomes %s: %w", where, catalog.TrimSQLError(err))
	}
	defer rows.Close()
	out := map[string]int64{}
	for rows.Next() {
		var o sql.NullString
		var n int64
		if err := rows.Scan(&o, &n); err != nil {
			return nil, "", err
		}
		if !o.Valid {
			return nil, "", errors.New("pipeline gave a row no outcome (NULL); nothing committed")
		}
		out[o.String] = n
	}
	return out, where, rows.Err()
}
