package catalog

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/idem-dev/idem/internal/job"
	"github.com/idem-dev/idem/internal/jobkey"
	"github.com/idem-dev/idem/internal/report"
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
	// A database of a release before catalog version 4, read as it is
	// (a read-only open does not migrate), has no idem.model_texts.
	if ok, err := TableExists(ctx, q, "idem", "model_texts"); err != nil || !ok {
		return "", false, err
	}
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

// macroTextsJob is the job column of the row of idem.model_texts that
// holds the macros job ran with: no job is named so (sqltext.Identifier has no
// slash), so the model rows of the job (ModelText) stay as they were.
func macroTextsJob(jobName string) string { return "macros/" + jobName }

// RecordMacroTexts keeps the texts of the macros j uses (job.MacroTexts),
// keyed by its transform part's sha256, which covers them, the first time
// a run of this database commits with them: a rerun of a snapshot built
// before a macro was edited takes them from here (MacroTexts). A job that
// uses no macro records nothing. Macro texts are SQL, never rows: an
// erasure has nothing to scrub in them.
func RecordMacroTexts(ctx context.Context, tx *sql.Tx, j *job.Job) error {
	texts := j.MacroTexts()
	if len(texts) == 0 {
		return nil
	}
	sum, name := j.TransformPart().SHA256, macroTextsJob(j.Name)
	_, err := tx.ExecContext(ctx, `INSERT INTO idem.model_texts (job, sha256, model, recorded_at)
		SELECT ?, ?, ?, current_timestamp
		WHERE NOT EXISTS (SELECT 1 FROM idem.model_texts WHERE job = ? AND sha256 = ?)`,
		name, sum, string(jobkey.CanonicalJSON(texts)), name, sum)
	if err != nil {
		return fmt.Errorf("record the macros of %s: %w", j.Name, err)
	}
	return nil
}

// MacroTexts are the macros job jobName ran with for the transform part of
// sha256 sum, and false when the database kept none (the job used no
// macro, or ran before idem kept them).
func MacroTexts(ctx context.Context, q Querier, jobName, sum string) ([]job.MacroText, bool, error) {
	text, kept, err := ModelText(ctx, q, macroTextsJob(jobName), sum)
	if err != nil || !kept {
		return nil, false, err
	}
	var texts []job.MacroText
	if err := json.Unmarshal([]byte(text), &texts); err != nil {
		return nil, false, fmt.Errorf("read the macros %s ran with (transform sha256 %s): %w", jobName, report.Short(sum), err)
	}
	return texts, true, nil
}

// ForgetTexts deletes, in expiry's transaction, the model and macro texts
// of job jobName that no snapshot from keepFrom on was built with, except
// the one of the transform part current (the job's definition now, which
// its next run records no more when a run of this process checked it).
func ForgetTexts(ctx context.Context, tx *sql.Tx, jobName string, keepFrom int64, current string) (int64, error) {
	res, err := tx.ExecContext(ctx, `DELETE FROM idem.model_texts
		WHERE job IN (?, ?) AND sha256 <> ? AND sha256 NOT IN (
			SELECT json_extract_string(parts, '$.transform.sha256') FROM idem.snapshots
			WHERE job = ? AND snapshot >= ? AND json_extract_string(parts, '$.transform.sha256') IS NOT NULL)`,
		jobName, macroTextsJob(jobName), current, jobName, keepFrom)
	if err != nil {
		return 0, fmt.Errorf("forget the texts of %s no kept snapshot needs: %w", jobName, err)
	}
	return res.RowsAffected()
}
