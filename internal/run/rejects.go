package run

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	"github.com/idem-dev/idem/internal/catalog"
	"github.com/idem-dev/idem/internal/job"
	"github.com/idem-dev/idem/internal/sqltext"
)

// A stream record that is not one record the pipeline can read (see
// source.ReadStreamBatch) is a row of no fields in its batch file; after
// the stage step idem gives that row (staged._row, from 1 in file order)
// the reject's outcome, whatever the pipeline's own checks said, so that
// every record read has exactly one outcome and the batch goes on.

// rejects are the rejects of the batch the run applies: read from the
// stream, or recorded with the snapshot a rerun replays.
func (p *Prepared) rejects(opts RunOptions) []catalog.Reject {
	if p.in != nil && p.in.Rejects != nil {
		return p.in.Rejects
	}
	return opts.Rejects
}

func (r *txRun) rejects() []catalog.Reject { return r.p.rejects(r.opts) }

// tagRejects sets the reason of each rejected row of staged to its
// outcome. A pipeline whose stage step gives no _row cannot take rejects:
// the run fails, naming the first.
func tagRejects(ctx context.Context, tx *sql.Tx, j *job.Job, rejects []catalog.Reject) error {
	if len(rejects) == 0 {
		return nil
	}
	var values []string
	for _, rj := range rejects {
		values = append(values, fmt.Sprintf("(%d, %s)", rj.Row, sqltext.SQLString(rj.Outcome)))
	}
	_, err := tx.ExecContext(ctx, "UPDATE staged SET reason = r.outcome FROM (VALUES "+strings.Join(values, ", ")+") AS r(_row, outcome) WHERE staged._row = r._row")
	if err != nil {
		first := rejects[0]
		return fmt.Errorf("pipeline %s: record %s:%d is %s, and its stage step's staged table has no _row and reason to record that in: %w",
			j.Pipeline.Name, first.Partition, first.Position, first.Outcome, contractError(j, "idem's stream rejects", catalog.TrimSQLError(err)))
	}
	return nil
}
