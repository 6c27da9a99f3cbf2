package run

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/idem-dev/idem/internal/job"
)

var missingTable = regexp.MustCompile(`Table with name "?([A-Za-z_][A-Za-z0-9_]*)"? does not exist`)

// contractError names the step that should have created a relation of the
// step contract when err is DuckDB's "does not exist" for it, and says who
// read it (reader); other errors are returned unchanged.
func contractError(j *job.Job, reader string, err error) error {
	m := missingTable.FindStringSubmatch(err.Error())
	if m == nil || len(j.Steps) == 0 {
		return err
	}
	switch strings.ToLower(m[1]) {
	case "staged":
		return fmt.Errorf("step %s did not create temp table staged (the stage step, the first, must create it: one row per input row, with a column reason); %s reads it: %w", j.Steps[0].Name, reader, err)
	case "outcomes":
		return fmt.Errorf("no step before %s created temp table outcomes (the outcomes step must create it: one row per staged row, with a column outcome): %w", reader, err)
	}
	return err
}
