package catalog

import (
	"context"
	"database/sql"
	"errors"

	"github.com/idem-dev/idem/internal/job"
	"github.com/idem-dev/idem/internal/pipeline"
	"github.com/idem-dev/idem/internal/report"
)

// CheckReleased refuses a run whose transform or schema version's files no
// longer match the sha256 recorded the first time this database used them,
// and records versions seen for the first time, a model's text
// (RecordModelText) and the macros the job uses (RecordMacroTexts). A
// model written as one file has no numbered version to check: its version
// is its text's sha256.
//
// Without record (a plan), a version not recorded yet is left unrecorded.
func CheckReleased(ctx context.Context, tx *sql.Tx, j *job.Job, record bool) error {
	check := func(kind string, version int, sum, what string) error {
		var recorded string
		err := tx.QueryRowContext(ctx, `SELECT sha256 FROM idem.released WHERE pipeline = ? AND kind = ? AND version = ?`,
			j.ReleaseName(), kind, version).Scan(&recorded)
		if errors.Is(err, sql.ErrNoRows) {
			if !record {
				return nil
			}
			_, err = tx.ExecContext(ctx, `INSERT INTO idem.released (pipeline, kind, version, sha256, recorded_at) VALUES (?, ?, ?, ?, current_timestamp)`, j.ReleaseName(), kind, version, sum)
			return err
		}
		if err != nil {
			return err
		}
		if recorded != sum && j.IsModel() {
			return report.Refuse("released", "model %s v%d (%s) was edited after release (sha256 %s, recorded %s): released SQL never changes; add %s and set transform_version = %d instead", j.Name, version, j.ModelFile, sum[:12], recorded[:12], what, version+1)
		}
		if recorded != sum {
			return report.Refuse("released", "%s v%d of pipeline %s was edited after release (sha256 %s, recorded %s): released SQL never changes; add a new version (%s) instead", kind, version, j.Pipeline.Name, sum[:12], recorded[:12], what)
		}
		return nil
	}
	if record {
		if err := RecordModelText(ctx, tx, j); err != nil {
			return err
		}
		if err := RecordMacroTexts(ctx, tx, j); err != nil {
			return err
		}
	}
	if j.ContentVersioned() {
		return nil // its version is its text's sha256: an edit is a new version
	}
	if err := check("transform", j.TransformVersion, pipeline.StepsDigest(j.Steps), j.NextVersionHint()); err != nil {
		return err
	}
	if j.IsModel() {
		return nil // a model's schema is its SELECT's result, in the key's schema part
	}
	return check("schema", j.SchemaVersion, pipeline.DigestString(j.DDL), "schema/v<N+1>.sql")
}
