package catalog

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/idem-dev/idem/internal/job"
	"github.com/idem-dev/idem/internal/sqltext"
)

// SubjectColumnsSQL is the SQL of idem.erasures' subject_columns: NULL in a
// database from before catalog version 3 opened read-only (not migrated),
// whose erasures are all of keys.
func SubjectColumnsSQL(ctx context.Context, q Querier) (string, error) {
	return erasuresColumnSQL(ctx, q, "subject_columns")
}

// saltSQL is the SQL of idem.erasures' salt: NULL in a database from
// before catalog version 6 opened read-only (not migrated), whose keys are
// the values.
func saltSQL(ctx context.Context, q Querier) (string, error) {
	return erasuresColumnSQL(ctx, q, "salt")
}

// erasuresColumnSQL is col, or NULL where idem.erasures lacks it.
func erasuresColumnSQL(ctx context.Context, q Querier, col string) (string, error) {
	var n int
	if err := q.QueryRowContext(ctx, `SELECT count(*) FROM duckdb_columns() WHERE database_name = current_database()
		AND schema_name = 'idem' AND table_name = 'erasures' AND column_name = ?`, col).Scan(&n); err != nil {
		return "", fmt.Errorf("read idem.erasures' columns: %w", err)
	}
	if n == 0 {
		return "CAST(NULL AS VARCHAR)", nil
	}
	return col, nil
}

// idem.erasures keeps no erased value: key is sha256(salt || value) in
// lower-case hex (the erasure journal's hash, run.HashValue), salt the
// database id of the database the erasure was made in (catalog version 6).
// A value is compared with a row by hashing it with the row's salt.

// CountErasures counts the erasures of value recorded for job: of a value
// of the pipeline's key, or with subject, of a subject value.
func CountErasures(ctx context.Context, q Querier, j, value string, subject bool) (int, error) {
	var prior int
	if err := q.QueryRowContext(ctx, `SELECT count(*) FROM idem.erasures WHERE job = ? AND key = sha256(salt || ?) AND (subject_columns IS NOT NULL) = ?`, j, value, subject).Scan(&prior); err != nil {
		return 0, fmt.Errorf("read erasures of %s: %w", j, err)
	}
	return prior, nil
}

// RecordErasure records the erasure of value from job at snapshot S, as
// its hash salted with the database's id. With subject columns it is the
// erasure of a subject value by those columns.
func RecordErasure(ctx context.Context, q Querier, j, value string, position *int64, snapshot int64, subject []string) error {
	cols, err := subjectJSON(subject)
	if err != nil {
		return err
	}
	res, err := q.ExecContext(ctx, `INSERT INTO idem.erasures (job, key, position, snapshot, erased_at, subject_columns, salt)
		SELECT ?, sha256(db_id || ?), ?, ?, current_timestamp, ?, db_id FROM idem.commits WHERE seq = 0`,
		j, value, position, snapshot, cols)
	return recorded(res, err)
}

// RecordErasedHash records an erasure by its salt and hash (a journal's
// entry, or a recorded erasure a rerun replays), as RecordErasure does.
func RecordErasedHash(ctx context.Context, q Querier, j, salt, hash string, position *int64, snapshot int64, subject []string) error {
	cols, err := subjectJSON(subject)
	if err != nil {
		return err
	}
	res, err := q.ExecContext(ctx, `INSERT INTO idem.erasures (job, key, position, snapshot, erased_at, subject_columns, salt) VALUES (?, ?, ?, ?, current_timestamp, ?, ?)`,
		j, hash, position, snapshot, cols, salt)
	return recorded(res, err)
}

func subjectJSON(subject []string) (any, error) {
	if subject == nil {
		return nil, nil
	}
	b, err := json.Marshal(subject)
	if err != nil {
		return nil, err
	}
	return string(b), nil
}

// recorded checks the insert of one erasure row.
func recorded(res sql.Result, err error) error {
	if err != nil {
		return fmt.Errorf("record erasure: %w", err)
	}
	if n, err := res.RowsAffected(); err != nil || n != 1 {
		return fmt.Errorf("record erasure: %d row(s) written, want 1 (idem.commits has no row 0?): %v", n, err)
	}
	return nil
}

// Erasure is one recorded erasure of a key, or with Subject, of a subject
// value by those columns: Key is the hash of the value with Salt, or, in a
// database of a catalog before 6 read as it is (Salt ""), the value.
type Erasure struct {
	Key      string
	Salt     string
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
	salt, err := saltSQL(ctx, q)
	if err != nil {
		return nil, err
	}
	rows, err := q.QueryContext(ctx, `SELECT snapshot, key, `+salt+`, position, `+cols+` AS subject_columns FROM idem.erasures WHERE job = ? ORDER BY snapshot, subject_columns NULLS FIRST, key`, j)
	if err != nil {
		return nil, fmt.Errorf("read erasures of %s: %w", j, err)
	}
	defer rows.Close()
	out := map[int64][]Erasure{}
	for rows.Next() {
		var s int64
		var e Erasure
		var cols, salt sql.NullString
		if err := rows.Scan(&s, &e.Key, &salt, &e.Position, &cols); err != nil {
			return nil, err
		}
		e.Salt = salt.String
		if cols.Valid {
			if err := json.Unmarshal([]byte(cols.String), &e.Subject); err != nil {
				return nil, fmt.Errorf("erasure of snapshot %d of %s: subject columns %q: %w", s, j, cols.String, err)
			}
		}
		out[s] = append(out[s], e)
	}
	return out, rows.Err()
}

// erasedKeysSQL is a query of the job's (parameter 1 and 2) erasures of
// keys matched by text, a relation of distinct key texts (column key):
// each text erased with the highest position its erasures recorded.
func erasedKeysSQL(text string) string {
	return `SELECT h.key, max(e.position) AS position
FROM (SELECT t.key, s.salt, sha256(s.salt || t.key) AS hash
      FROM (` + text + `) AS t,
           (SELECT DISTINCT salt FROM idem.erasures WHERE job = ? AND subject_columns IS NULL) AS s
      WHERE t.key IS NOT NULL) AS h
JOIN idem.erasures AS e ON e.salt = h.salt AND e.key = h.hash
WHERE e.job = ? AND e.subject_columns IS NULL
GROUP BY h.key`
}

// ErasedIn counts the rows of a pinned read whose key was erased at or above
// the row's position (any row of the key when the pipeline has no position
// column). The database is migrated (a rollback writes).
func ErasedIn(ctx context.Context, q Querier, j *job.Job, pinned string) (int64, error) {
	if len(j.Pipeline.Key) != 1 {
		return 0, nil
	}
	key := "CAST(p." + sqltext.QuoteIdent(j.Pipeline.Key[0]) + " AS VARCHAR)"
	cond := "TRUE"
	if j.Pipeline.Position != "" {
		cond = "e.position IS NULL OR TRY_CAST(p." + sqltext.QuoteIdent(j.Pipeline.Position) + " AS BIGINT) <= e.position"
	}
	var n int64
	err := q.QueryRowContext(ctx, "SELECT count(*) FROM ("+pinned+") AS p JOIN ("+erasedKeysSQL("SELECT DISTINCT "+key+" AS key FROM ("+pinned+") AS p")+") AS e ON "+key+" = e.key WHERE "+cond, j.Name, j.Name).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("check erasures of %s: %w", j.Name, TrimSQLError(err))
	}
	return n, nil
}

// PrepareErasures gives the steps the job's erased keys that the input
// holds as temp table idem_erased(key, position): the erasures keep only
// the keys' hashes, so the input's keys are hashed with their salts. A
// key of several columns is matched as the JSON array of its values (the
// text erase --key records). The input must be staged (temp view input).
func PrepareErasures(ctx context.Context, tx *sql.Tx, j *job.Job) error {
	if _, err := tx.ExecContext(ctx, `CREATE OR REPLACE TEMP TABLE idem_erased (key VARCHAR, position BIGINT)`); err != nil {
		return fmt.Errorf("read erasures of job %s: %w", j.Name, err)
	}
	if _, err := tx.ExecContext(ctx, `DROP TABLE IF EXISTS idem_touched`); err != nil {
		return err
	}
	keys := j.Pipeline.Key
	var erased int
	// A run writes, so its database is migrated: salt exists.
	if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM idem.erasures WHERE job = ? AND subject_columns IS NULL`, j.Name).Scan(&erased); err != nil {
		return fmt.Errorf("read erasures of job %s: %w", j.Name, err)
	}
	if erased == 0 || len(keys) == 0 {
		return nil
	}
	cols, err := Strings(ctx, tx, `SELECT column_name FROM duckdb_columns() WHERE database_name = 'temp' AND table_name = 'input'`)
	if err != nil {
		return fmt.Errorf("read erasures of job %s: input columns: %w", j.Name, err)
	}
	for _, k := range keys {
		if !slices.Contains(cols, k) {
			return nil // the input does not hold the key: nothing to match
		}
	}
	texts := make([]string, len(keys))
	for i, k := range keys {
		texts[i] = "CAST(" + sqltext.QuoteIdent(k) + " AS VARCHAR)"
	}
	text := texts[0]
	if len(keys) > 1 {
		text = "CASE WHEN " + strings.Join(texts, " IS NOT NULL AND ") + " IS NOT NULL THEN CAST(to_json([" + strings.Join(texts, ", ") + "]) AS VARCHAR) END"
	}
	if _, err := tx.ExecContext(ctx, "INSERT INTO idem_erased "+erasedKeysSQL("SELECT DISTINCT "+text+" AS key FROM input"), j.Name, j.Name); err != nil {
		return fmt.Errorf("read erasures of job %s: %w", j.Name, TrimSQLError(err))
	}
	return nil
}
