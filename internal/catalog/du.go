package catalog

import (
	"context"
	"fmt"
	"sort"

	"github.com/idem-dev/idem/internal/sqltext"
)

// Storage is an estimate of the bytes each table of the database takes in
// the file, from DuckDB's pragma_storage_info: every persistent column
// segment lives at an offset in a block, so a segment is given the bytes
// up to the next segment of its block, the last one of a shared (partial)
// block the mean size of the others, the only one of a block the whole
// block, and a segment's additional blocks whole. The blocks of all tables
// add up to at most UsedBlocks (pragma_database_size), the rest being
// DuckDB's metadata; data not yet checkpointed (in the WAL) is not
// counted.
type Storage struct {
	BlockSize   int64
	TotalBlocks int64
	UsedBlocks  int64
	FreeBlocks  int64
	// Tables maps "schema.table" to its bytes.
	Tables map[string]int64
}

// TableBytes is the estimate for one table (0 when it does not exist).
func (s *Storage) TableBytes(schema, table string) int64 { return s.Tables[schema+"."+table] }

// ReadStorage estimates the bytes of every table of the database.
func ReadStorage(ctx context.Context, q Querier) (*Storage, error) {
	s := &Storage{Tables: map[string]int64{}}
	if err := q.QueryRowContext(ctx, `SELECT block_size, total_blocks, used_blocks, free_blocks FROM pragma_database_size() WHERE database_name = current_database()`).
		Scan(&s.BlockSize, &s.TotalBlocks, &s.UsedBlocks, &s.FreeBlocks); err != nil {
		return nil, fmt.Errorf("read the database size: %w", err)
	}
	rows, err := q.QueryContext(ctx, `SELECT schema_name, table_name FROM duckdb_tables() WHERE database_name = current_database() ORDER BY ALL`)
	if err != nil {
		return nil, fmt.Errorf("list tables: %w", err)
	}
	var tables [][2]string
	for rows.Next() {
		var t [2]string
		if err := rows.Scan(&t[0], &t[1]); err != nil {
			rows.Close()
			return nil, err
		}
		tables = append(tables, t)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	type segment struct {
		table  string
		offset int64
	}
	blocks := map[int64][]segment{}
	for _, t := range tables {
		name := t[0] + "." + t[1]
		s.Tables[name] += 0
		r, err := q.QueryContext(ctx, `SELECT block_id, block_offset, len(additional_block_ids) FROM pragma_storage_info(`+
			sqltext.SQLString(sqltext.QuoteIdent(t[0])+"."+sqltext.QuoteIdent(t[1]))+`) WHERE persistent AND block_id >= 0`)
		if err != nil {
			return nil, fmt.Errorf("storage of %s: %w", name, TrimSQLError(err))
		}
		for r.Next() {
			var block, offset, extra int64
			if err := r.Scan(&block, &offset, &extra); err != nil {
				r.Close()
				return nil, err
			}
			blocks[block] = append(blocks[block], segment{name, offset})
			s.Tables[name] += extra * s.BlockSize
		}
		r.Close()
		if err := r.Err(); err != nil {
			return nil, err
		}
	}
	for _, segs := range blocks {
		sort.Slice(segs, func(i, k int) bool { return segs[i].offset < segs[k].offset })
		last := segs[len(segs)-1]
		if len(segs) == 1 {
			s.Tables[last.table] += s.BlockSize - last.offset
			continue
		}
		// A block shared by several segments is a partial block: its tail
		// is free space, so its last segment is given the mean size of
		// the others rather than the rest of the block.
		for i, sg := range segs[:len(segs)-1] {
			s.Tables[sg.table] += segs[i+1].offset - sg.offset
		}
		s.Tables[last.table] += min(last.offset/int64(len(segs)-1), s.BlockSize-last.offset)
	}
	return s, nil
}

// JobInputBytes sums the recorded sizes of the distinct retained inputs
// the snapshots of job j name, and counts them.
func JobInputBytes(ctx context.Context, q Querier, j string) (files int64, bytes int64, err error) {
	snaps, err := ReadSnapshots(ctx, q, j, 1<<62)
	if err != nil {
		return 0, 0, err
	}
	sizes, err := RetainedInputSizes(ctx, q)
	if err != nil {
		return 0, 0, err
	}
	seen := map[string]bool{}
	for _, s := range snaps {
		for _, f := range s.Inputs.Files {
			if n, ok := sizes[f.SHA256]; ok && !seen[f.SHA256] {
				seen[f.SHA256] = true
				files++
				bytes += n
			}
		}
	}
	return files, bytes, nil
}

// CheckpointBytes sums the bytes idem.checkpoints records for job j, 0
// when the table (or its job and bytes columns) does not exist.
func CheckpointBytes(ctx context.Context, q Querier, j string) (int64, error) {
	cols, err := TargetColumnsIn(ctx, q, "idem", "checkpoints")
	if err != nil {
		return 0, err
	}
	have := map[string]bool{}
	for _, c := range cols {
		have[c.Name] = true
	}
	if !have["job"] || !have["bytes"] {
		return 0, nil
	}
	var n int64
	if err := q.QueryRowContext(ctx, `SELECT coalesce(sum(bytes), 0) FROM idem.checkpoints WHERE job = ?`, j).Scan(&n); err != nil {
		return 0, fmt.Errorf("read checkpoints of %s: %w", j, err)
	}
	return n, nil
}

// CountWhere counts the rows of table (in main) where column equals value.
func CountWhere(ctx context.Context, q Querier, table, column, value string) (int64, error) {
	var n int64
	if err := q.QueryRowContext(ctx, "SELECT count(*) FROM "+sqltext.QuoteIdent(table)+" WHERE "+sqltext.QuoteIdent(column)+" = ?", value).Scan(&n); err != nil {
		return 0, fmt.Errorf("count rows of %s: %w", table, TrimSQLError(err))
	}
	return n, nil
}

// CountQualified counts the rows of a qualified table name (schema.table,
// quoted), 0 when it does not exist.
func CountQualified(ctx context.Context, q Querier, schema, table string) (int64, error) {
	ok, err := TableExists(ctx, q, schema, table)
	if err != nil || !ok {
		return 0, err
	}
	var n int64
	if err := q.QueryRowContext(ctx, "SELECT count(*) FROM "+sqltext.QuoteIdent(schema)+"."+sqltext.QuoteIdent(table)).Scan(&n); err != nil {
		return 0, fmt.Errorf("count rows of %s.%s: %w", schema, table, TrimSQLError(err))
	}
	return n, nil
}
