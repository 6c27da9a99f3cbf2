package catalog

import "context"

// RecordInput records a retained input file, once per content.
func RecordInput(ctx context.Context, q Querier, sum string, size int64) error {
	_, err := q.ExecContext(ctx, `INSERT INTO idem.inputs (sha256, bytes, stored_at) SELECT ?, ?, current_timestamp WHERE NOT EXISTS (SELECT 1 FROM idem.inputs WHERE sha256 = ?)`, sum, size, sum)
	return err
}

// InputReferences counts the snapshot rows that name the retained input sum.
func InputReferences(ctx context.Context, q Querier, sum string) (int, error) {
	var refs int
	err := q.QueryRowContext(ctx, `SELECT count(*) FROM idem.snapshots WHERE contains(inputs, ?)`, sum).Scan(&refs)
	return refs, err
}

// ForgetInput deletes the record of the retained input sum: the next sweep
// of the store deletes the file.
func ForgetInput(ctx context.Context, q Querier, sum string) error {
	_, err := q.ExecContext(ctx, `DELETE FROM idem.inputs WHERE sha256 = ?`, sum)
	return err
}

// RetainedSums is the set of retained inputs a committed row names.
func RetainedSums(ctx context.Context, q Querier) (map[string]bool, error) {
	rows, err := q.QueryContext(ctx, `SELECT DISTINCT sha256 FROM idem.inputs`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	keep := map[string]bool{}
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			return nil, err
		}
		keep[s] = true
	}
	return keep, rows.Err()
}
