package catalog

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"

	"github.com/idem-dev/idem/internal/job"
)

// SubjectColumnsSQL is the SQL of idem.erasures' subject_columns: NULL in a
// database from before catalog version 3 opened read-only (not migrated),
// whose erasures are all of keys.
func SubjectColumnsSQL(ctx context.Context, q Querier) (string, error) {
	var n int
	if err := q.QueryRowContext(ctx, `SELECT count(*) FROM duckdb_columns() WHERE database_name = current_database()
		AND schema_name = 'idem' AND table_name = 'erasures' AND column_name = 'subject_columns'`).Scan(&n); err != nil {
		return "", fmt.Errorf("read idem.erasures' columns: %w", err)
	}
	if n == 0 {
		return "CAST(NULL AS VARCHAR)", nil
	}
	return "subject_columns", nil
}

// CountErasures counts the erasures of key recorded for job: of a value of
// the pipeline's key, or with subject, of a subject value.
func CountErasures(ctx context.Context, q Querier, j, key string, subject bool) (int, error) {
	var prior int
	if err := q.QueryRowContext(ctx, `SELECT count(*) FROM idem.erasures WHERE job = ? AND key = ? AND (subject_columns IS NOT NULL) = ?`, j, key, subject).Scan(&prior); err != nil {
		return 0, fmt.Errorf("read erasures of %s: %w", j, err)
	}
	return prior, nil
}

// RecordErasure records the erasure of key from job at snapshot S. With
// subject columns it is the erasure of a subject value by those columns.
func RecordErasure(ctx context.Context, q Querier, j, key string, position *int64, snapshot int64, subject []string) error {
	var cols any
	if subject != nil {
		b, err := json.Marshal(subject)
		if err != nil {
			return err
		}
		cols = string(b)
	}
	if _, err := q.ExecContext(ctx, `INSERT INTO idem.erasures (job, key, position, snapshot, erased_at, subject_columns) VALUES (?, ?, ?, ?, current_timestamp, ?)`,
		j, key, position, snapshot, cols); err != nil {
		return fmt.Errorf("record erasure: %w", err)
	}
	return nil
}

// Erasure is one recorded erasure of a key, or with Subject, of a subject
// value by those columns.
type Erasure struct {
	Key      string
	Position *int64
	Subject  []string
}

// ErasuresBySnapshot reads job's erasures by the snapshot that committed
// them.
func ErasuresBySnapshot(ctx context.Context, q Querier, j string) (map[int64][]Erasure, error) {
	cols, err := SubjectColumnsSQL(ctx, q)
	if err != nil {
		return nil, err
	}
	rows, err := q.QueryContext(ctx, `SELECT snapshot, key, position, `+cols+` AS subject_columns FROM idem.erasures WHERE job = ? ORDER BY snapshot, subject_columns NULLS FIRST, key`, j)
	if err != nil {
		return nil, fmt.Errorf("read erasures of %s: %w", j, err)
	}
	defer rows.Close()
	out := map[int64][]Erasure{}
	for rows.Next() {
		var s int64
		var e Erasure
		var cols sql.NullString
		if err := rows.Scan(&s, &e.Key, &e.Position, &cols); err != nil {
			return nil, err
		}
		if cols.Valid {
			if err := json.Unmarshal([]byte(cols.String), &e.Subject); err != nil {
				return nil, fmt.Errorf("erasure of snapshot %d of %s: subject columns %q: %w", s, j, cols.String, err)
			}
		}
		out[s] = append(out[s], e)
	}
	return out, rows.Err()
}

// ErasedIn counts the rows of a pinned read whose key was erased at or above
// the row's position (any row of the key when the pipeline has no position
// column).
func ErasedIn(ctx context.Context, q Querier, j *job.Job, pinned string) (int64, error) {
	if len(j.Pipeline.Key) != 1 {
		return 0, nil
	}
	key := "p." + job.QuoteIdent(j.Pipeline.Key[0])
	cond := "TRUE"
	if j.Pipeline.Position != "" {
		cond = "e.position IS NULL OR TRY_CAST(p." + job.QuoteIdent(j.Pipeline.Position) + " AS BIGINT) <= e.position"
	}
	var n int64
	cols, err := SubjectColumnsSQL(ctx, q)
	if err != nil {
		return 0, err
	}
	err = q.QueryRowContext(ctx, "SELECT count(*) FROM ("+pinned+") AS p JOIN (SELECT key, max(position) AS position FROM idem.erasures WHERE job = ? AND "+cols+" IS NULL GROUP BY key) AS e ON CAST("+key+" AS VARCHAR) = e.key WHERE "+cond, j.Name).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("check erasures of %s: %w", j.Name, TrimSQLError(err))
	}
	return n, nil
}

// PrepareErasures gives the steps the job's erased keys as temp table
// idem_erased(key, position).
func PrepareErasures(ctx context.Context, tx *sql.Tx, j *job.Job) error {
	// A run writes, so its database is migrated: subject_columns exists.
	_, err := tx.ExecContext(ctx, `CREATE OR REPLACE TEMP TABLE idem_erased AS
		SELECT key, max(position) AS position FROM idem.erasures WHERE job = ? AND subject_columns IS NULL GROUP BY key`, j.Name)
	if err != nil {
		return fmt.Errorf("read erasures of job %s: %w", j.Name, err)
	}
	_, err = tx.ExecContext(ctx, `DROP TABLE IF EXISTS idem_touched`)
	return err
}
