package catalog

import (
	"context"
	"database/sql"
	"fmt"
	"sort"
)

// idem.positions holds, per job reading a stream and per source partition
// (a Kafka partition number; "" for an SSE feed), the position of the next
// record to read and the snapshot that committed it. It is written in the
// run's transaction with the batch's rows, so the rows and the position
// they reach commit together or not at all.

// ReadPositions returns job's committed next position per partition; an
// empty map for a job that never committed a batch.
func ReadPositions(ctx context.Context, q Querier, job string) (map[string]int64, error) {
	rows, err := q.QueryContext(ctx, `SELECT partition, next FROM idem.positions WHERE job = ? ORDER BY partition`, job)
	if err != nil {
		return nil, fmt.Errorf("read stream positions of %s: %w", job, err)
	}
	defer rows.Close()
	out := map[string]int64{}
	for rows.Next() {
		var p string
		var n int64
		if err := rows.Scan(&p, &n); err != nil {
			return nil, fmt.Errorf("read stream positions of %s: %w", job, err)
		}
		out[p] = n
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read stream positions of %s: %w", job, err)
	}
	return out, nil
}

// WritePositions sets job's next position of each partition in next,
// committed by snapshot; partitions not in next keep their rows. It runs in
// the run's transaction.
func WritePositions(ctx context.Context, q Querier, job string, next map[string]int64, snapshot int64) error {
	parts := make([]string, 0, len(next))
	for p := range next {
		parts = append(parts, p)
	}
	sort.Strings(parts)
	for _, p := range parts {
		if _, err := q.ExecContext(ctx, `DELETE FROM idem.positions WHERE job = ? AND partition = ?`, job, p); err != nil {
			return fmt.Errorf("write stream position %s of %s: %w", p, job, err)
		}
		if _, err := q.ExecContext(ctx, `INSERT INTO idem.positions (job, partition, next, snapshot, updated_at) VALUES (?, ?, ?, ?, current_timestamp)`,
			job, p, next[p], snapshot); err != nil {
			return fmt.Errorf("write stream position %s of %s: %w", p, job, err)
		}
	}
	return nil
}

// StreamIdentity is the identity of the source (a Kafka topic's ID) that
// job's first and latest stream batches recorded ("" when none did).
func StreamIdentity(ctx context.Context, q Querier, job string) (first, last string, err error) {
	var f, l sql.NullString
	err = q.QueryRowContext(ctx, `SELECT arg_min(id, snapshot), arg_max(id, snapshot) FROM (
		SELECT snapshot, json_extract_string(inputs, '$.stream_id') AS id FROM idem.snapshots WHERE job = ?) WHERE id IS NOT NULL`, job).Scan(&f, &l)
	if err != nil {
		return "", "", fmt.Errorf("read the stream identity of %s: %w", job, err)
	}
	return f.String, l.String, nil
}
