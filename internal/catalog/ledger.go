package catalog

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/idem-dev/idem/internal/sqltext"
)

// LedgerRow is a committed batch as the ledger recorded it.
type LedgerRow struct {
	Digest, Outcomes string
	RowsIn, Snapshot int64
	To               sql.NullInt64
}

// ReadLedger reads the ledger row of job's batch; ok is false when the
// batch was never committed.
func ReadLedger(ctx context.Context, q Querier, j, batchID string) (row LedgerRow, ok bool, err error) {
	err = q.QueryRowContext(ctx, `SELECT digest, rows_in, outcomes, snapshot, to_pos FROM idem.ledger WHERE job = ? AND batch_id = ?`,
		j, batchID).Scan(&row.Digest, &row.RowsIn, &row.Outcomes, &row.Snapshot, &row.To)
	if errors.Is(err, sql.ErrNoRows) {
		return row, false, nil
	}
	if err != nil {
		return row, false, fmt.Errorf("read ledger of job %s: %w", j, err)
	}
	return row, true, nil
}

// NewBatch is a ledger row a run writes. From and To are nil when the
// batch has no bounds.
type NewBatch struct {
	Job, BatchID, Digest, InputDigest string
	From, To                          any
	RowsIn                            int64
	Outcomes                          string // JSON
	Snapshot                          int64
}

// InsertLedger writes the ledger row of a committed batch.
func InsertLedger(ctx context.Context, q Querier, b NewBatch) error {
	if _, err := q.ExecContext(ctx, `INSERT INTO idem.ledger (job, batch_id, digest, input_digest, from_pos, to_pos, rows_in, outcomes, snapshot, committed_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, current_timestamp)`,
		b.Job, b.BatchID, b.Digest, b.InputDigest, b.From, b.To, b.RowsIn, b.Outcomes, b.Snapshot); err != nil {
		return fmt.Errorf("write ledger: %w", err)
	}
	return nil
}

// LedgerBatchesUpTo is a subquery of the batch ids job committed up to and
// including snapshot S.
func LedgerBatchesUpTo(j string, snapshot int64) string {
	return fmt.Sprintf("SELECT batch_id FROM idem.ledger WHERE job = %s AND snapshot <= %d", sqltext.SQLString(j), snapshot)
}

// ReadInput reports whether job committed a batch read from the input with
// this digest.
func ReadInput(ctx context.Context, q Querier, j, inputDigest string) (bool, error) {
	var read bool
	if err := q.QueryRowContext(ctx, `SELECT count(*) > 0 FROM idem.ledger WHERE job = ? AND input_digest = ?`, j, inputDigest).Scan(&read); err != nil {
		return false, fmt.Errorf("read ledger of job %s: %w", j, err)
	}
	return read, nil
}

// ChunkStart reports whether the job has committed a chunk, and its cursor.
func ChunkStart(ctx context.Context, q Querier, j string) (bool, int64, error) {
	var n, cursor int64
	err := q.QueryRowContext(ctx, `SELECT (SELECT count(*) FROM idem.ledger WHERE job = ?), coalesce((SELECT cursor FROM idem.jobs WHERE job = ?), 0)`, j, j).Scan(&n, &cursor)
	if err != nil {
		return false, 0, fmt.Errorf("read watermark of job %s: %w", j, err)
	}
	return n > 0, cursor, nil
}
