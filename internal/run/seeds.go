package run

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
	"strings"

	"github.com/idem-dev/idem/internal/catalog"
	"github.com/idem-dev/idem/internal/job"
	"github.com/idem-dev/idem/internal/report"
	"github.com/idem-dev/idem/internal/sqltext"
)

// seedConflictKeys is how many conflicting keys a seed's refusal names.
const seedConflictKeys = 5

// refuseSeedConflicts refuses (report.ErrRefused, exit 3) the run of a seed
// (a reference table, [input] mode = "replace") whose file holds keys with
// rows of different values, unless the job sets [input] conflicts =
// "keep": a dbt seed is a hand-kept table, and a duplicated key in it is a
// mistake to fix, not a row to keep as a conflict. The refusal names the
// first keys (in key order) and the input rows of each (rows count from 1
// after a CSV header; the file line is one more). It reads the pipeline's
// staged and outcomes tables, inside the run's transaction.
func refuseSeedConflicts(ctx context.Context, tx *sql.Tx, j *job.Job, files []string, counts map[string]int64) error {
	if j.Input.Conflicts != job.ConflictsRefuse || counts["conflict"] == 0 {
		return nil
	}
	var keyCols, keyText []string
	for _, k := range j.Key {
		keyCols = append(keyCols, "s."+sqltext.QuoteIdent(k))
		keyText = append(keyText, "CAST(s."+sqltext.QuoteIdent(k)+" AS VARCHAR)")
	}
	q := `SELECT ` + strings.Join(keyText, ", ") + `,
       string_agg(CAST(s._row AS VARCHAR), ', ' ORDER BY s._row),
       count(*) OVER ()
FROM staged AS s JOIN outcomes AS o ON o._row = s._row
WHERE o.outcome = 'conflict'
GROUP BY ` + strings.Join(keyCols, ", ") + `
ORDER BY ` + strings.Join(keyCols, ", ") + `
LIMIT ` + strconv.Itoa(seedConflictKeys)
	rows, err := tx.QueryContext(ctx, q)
	if err != nil {
		return fmt.Errorf("seed %s: name its conflicting keys: %w", j.Name, catalog.TrimSQLError(err))
	}
	defer rows.Close()
	var named []string
	var keys int64
	for rows.Next() {
		vals := make([]sql.NullString, len(j.Key))
		var at string
		dest := make([]any, 0, len(vals)+2)
		for i := range vals {
			dest = append(dest, &vals[i])
		}
		if err := rows.Scan(append(dest, &at, &keys)...); err != nil {
			return fmt.Errorf("seed %s: name its conflicting keys: %w", j.Name, err)
		}
		var key []string
		for i, k := range j.Key {
			key = append(key, k+"="+vals[i].String)
		}
		named = append(named, strings.Join(key, ", ")+" at rows "+at)
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("seed %s: name its conflicting keys: %w", j.Name, err)
	}
	more := ""
	if keys > int64(len(named)) {
		more = fmt.Sprintf("; and %d more", keys-int64(len(named)))
	}
	refused := report.Refuse("seed conflicts", "seed %s: %d key(s) of %s hold rows with different values (%d rows): %s%s; fix the file, or set [input] conflicts = %q to store them as conflict rows; nothing committed",
		j.Name, keys, strings.Join(files, ", "), counts["conflict"], strings.Join(named, "; "), more, job.ConflictsKeep)
	return &SeedConflictError{refused: refused, Job: j.Name, Keys: keys, Rows: counts["conflict"]}
}

// SeedConflictError is the refusal of a seed whose file holds conflicting
// keys (refuseSeedConflicts): its text names the keys with their values,
// which LogMessage leaves out, as KeyError's does (the run log keeps no row
// values: it outlives erasures). It is a *report.RefusedError underneath
// (exit 3).
type SeedConflictError struct {
	refused    error
	Job        string
	Keys, Rows int64
}

func (e *SeedConflictError) Error() string { return e.refused.Error() }

func (e *SeedConflictError) Unwrap() error { return e.refused }

// LogMessage is e without the keys' values, for the run log.
func (e *SeedConflictError) LogMessage() string {
	return fmt.Sprintf("refused: seed %s: %d key(s) hold rows with different values (%d rows); nothing committed", e.Job, e.Keys, e.Rows)
}
