package catalog

import (
	"context"
	"database/sql"
	"fmt"
	"sort"
	"strings"
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
// the run's transaction: one UPDATE of the rows in place (a batch of a
// follower moves partitions it committed before), and an INSERT only for
// partitions without a row yet.
func WritePositions(ctx context.Context, q Querier, job string, next map[string]int64, snapshot int64) error {
	if len(next) == 0 {
		return nil
	}
	parts := make([]string, 0, len(next))
	for p := range next {
		parts = append(parts, p)
	}
	sort.Strings(parts)
	values := strings.TrimSuffix(strings.Repeat("(CAST(? AS VARCHAR), CAST(? AS BIGINT)), ", len(parts)), ", ")
	args := make([]any, 0, 2*len(parts)+3)
	for _, p := range parts {
		args = append(args, p, next[p])
	}
	res, err := q.ExecContext(ctx, `UPDATE idem.positions SET next = v.next, snapshot = ?, updated_at = current_timestamp
		FROM (VALUES `+values+`) AS v(partition, next) WHERE positions.job = ? AND positions.partition = v.partition`,
		append(append([]any{snapshot}, args...), job)...)
	if err != nil {
		return fmt.Errorf("write the stream positions of %s: %w", job, err)
	}
	if n, err := res.RowsAffected(); err == nil && n == int64(len(parts)) {
		return nil
	}
	if _, err := q.ExecContext(ctx, `INSERT INTO idem.positions (job, partition, next, snapshot, updated_at)
		SELECT ?, v.partition, v.next, ?, current_timestamp FROM (VALUES `+values+`) AS v(partition, next)
		WHERE v.partition NOT IN (SELECT partition FROM idem.positions WHERE job = ?) ORDER BY v.partition`,
		append(append([]any{job, snapshot}, args...), job)...); err != nil {
		return fmt.Errorf("write the stream positions of %s: %w", job, err)
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
