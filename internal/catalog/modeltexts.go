package catalog

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/idem-dev/idem/internal/job"
)

// RecordModelText keeps the text of model j's version (keyed by its
// transform part's sha256) the first time a run of this database commits
// with it, so that a rerun rebuilds the snapshot with the SQL it ran with
// after the model file was edited (job.ContentVersioned).
func RecordModelText(ctx context.Context, tx *sql.Tx, j *job.Job) error {
	if !j.IsModel() {
		return nil
	}
	sum := j.TransformPart().SHA256
	_, err := tx.ExecContext(ctx, `INSERT INTO idem.model_texts (job, sha256, model, recorded_at)
		SELECT ?, ?, ?, current_timestamp
		WHERE NOT EXISTS (SELECT 1 FROM idem.model_texts WHERE job = ? AND sha256 = ?)`,
		j.Name, sum, j.ModelSQL, j.Name, sum)
	if err != nil {
		return fmt.Errorf("record the text of model %s: %w", j.Name, err)
	}
	return nil
}

// ModelText is the text model jobName ran with for the transform part of
// sha256 sum, and false when the database kept none.
func ModelText(ctx context.Context, q Querier, jobName, sum string) (string, bool, error) {
	var text string
	err := q.QueryRowContext(ctx, `SELECT model FROM idem.model_texts WHERE job = ? AND sha256 = ?`, jobName, sum).Scan(&text)
	if errors.Is(err, sql.ErrNoRows) {
		return "", false, nil
	}
	if err != nil {
		return "", false, err
	}
	return text, true, nil
}
