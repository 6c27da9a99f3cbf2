package run

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/idem-dev/idem/internal/catalog"
)

// When idem checkpoints. A COMMIT returns once DuckDB has written the
// transaction to the WAL and synced it: from then on a kill leaves it
// committed, the next open replaying the WAL into the file. A CHECKPOINT
// writes the WAL's commits into the database file and empties the WAL; it
// adds nothing to what survives a kill, and in DuckDB 1.5.6 it costs each
// later commit too (the first append to a table after a checkpoint starts
// a new 256 KiB segment per column: docs/benchmarks.md, "The fixed cost of
// a batch"). So a commit is not checkpointed by itself; its handle settles
// (checkpoints) the commits it left in the WAL:
//
//   - when the WAL has grown past walCheckpointThreshold: DuckDB does it
//     inside the COMMIT that crosses it (its checkpoint_threshold, set at
//     open);
//   - when the handle closes (DB.Close): a command that wrote, a project
//     run at its end (each database's handle is closed once every job is
//     done), a follower that stops or lets a waiting command have the
//     database (DB.Yield); so a file no writer holds has no WAL, unless a
//     kill left it;
//   - when a follower is idle (a read found no record) or its oldest
//     unsettled commit is followSettleAfter old (stream.go);
//   - at once after a commit when something else needs the file whole or
//     the WAL would not replay everywhere (checkpointNow).
//
// Commands that write the file outside a run (erase, compact, backup,
// rollback, expire, fence, migrations) checkpoint where they did before.

// walCheckpointThreshold is DuckDB's checkpoint_threshold on every
// writable open: a COMMIT that leaves a WAL past it checkpoints. It is
// DuckDB 1.5.6's default, pinned so that an engine upgrade does not change
// it unseen. A 10,000-record versioned_changes batch writes about 1.2 MiB
// of WAL, so a follower of such batches checkpoints about every 13.
const walCheckpointThreshold = "16MiB"

// followSettleAfter bounds how long a follower that never idles (a batch
// closed by max_wait every few seconds) leaves its commits in the WAL,
// which bounds what an open after a kill replays.
const followSettleAfter = time.Minute

// Fault points of a settle: the checkpoint of the commits a handle left in
// the WAL, at its close, on an idle follower. FaultSettle is passed just
// before the CHECKPOINT starts and FaultAfterSettle once it returned. The
// hook is the one the database was opened with (OpenOptions.Fault).
const (
	FaultSettle      = "settle"
	FaultAfterSettle = "after_settle"
)

// checkpointNow reports whether the commit just made on conn is to be
// checkpointed at once rather than left in the WAL: the read replica is
// published from the checkpointed file after every commit; DuckDB 1.5.6
// cannot replay, on a read-only open, a WAL that builds an index over rows
// (the open that checks a WAL before a writable one replays it is
// read-only: such a WAL would lock every command out after a kill); and
// DuckDB 2.0.0, on more than one thread, reads no row of a table created
// empty (CREATE TABLE AS ... LIMIT 0, as merge_by_key v2 makes its
// tombstones) and filled past a row group in the same transaction, in
// every later transaction until a checkpoint (TestBigNewTableCheckpointed):
// an upsert older than a delete would then find no tombstone. So a commit
// that created a table holding more than bigNewTableRows is checkpointed.
//
// Only tables this commit created count: a table an earlier commit made is
// at or below d.tablesSeen, the largest table oid the previous commit's
// check saw, and a follower's outcomes table that grows past a row group
// over many batches does not make every later batch checkpoint. The marks
// and the new tables' sizes are read in one statement, and only after a
// commit that may have created or altered a table or an index
// (catalogChanged: a statement of its transaction said CREATE, but not of
// a TEMP relation, or ALTER, COPY or IMPORT), or while an earlier such
// commit is not yet checkpointed (d.catalogPending): a stream batch or a
// run that only writes rows saves the read (1-4 ms a commit).
func (d *DB) checkpointNow(ctx context.Context, conn *sql.Conn) bool {
	if d.replica {
		return true
	}
	if !d.catalogPending && !catalogChanged(conn) {
		return false
	}
	d.catalogPending = true
	var m catalogMarks
	var big bool
	err := conn.QueryRowContext(ctx, marksQuery+`,
		(SELECT count(*) > 0 FROM duckdb_tables() WHERE database_name = current_database() AND NOT temporary AND table_oid > ? AND estimated_size > ?)`,
		max(d.marks.tables, d.tablesSeen), bigNewTableRows).Scan(&m.indexes, &m.tables, &big)
	if err != nil || m.indexes > d.marks.indexes {
		return true
	}
	d.tablesSeen = max(d.tablesSeen, m.tables)
	d.catalogPending = big
	return big
}

// bigNewTableRows is the size past which a table created by a commit
// makes it checkpoint at once: a little under DuckDB's row group (122,880
// rows), where its bug begins.
const bigNewTableRows = 100_000

// catalogMarks are the largest catalog oids of the database's indexes and
// of its tables (0: none). DuckDB gives every new catalog entry a higher
// oid than those before it, so an index built or a table created since
// the marks were read is above them.
type catalogMarks struct{ indexes, tables int64 }

func readMarks(ctx context.Context, q catalog.Querier) (catalogMarks, error) {
	var m catalogMarks
	err := q.QueryRowContext(ctx, marksQuery).Scan(&m.indexes, &m.tables)
	return m, err
}

// marksQuery reads the catalog marks: the largest index oid, then table oid.
const marksQuery = `SELECT
		(SELECT coalesce(max(index_oid), 0) FROM duckdb_indexes() WHERE database_name = current_database()),
		(SELECT coalesce(max(table_oid), 0) FROM duckdb_tables() WHERE database_name = current_database() AND NOT temporary)`

// settled records that the WAL holds no commit of this handle.
func (d *DB) settled(ctx context.Context, q catalog.Querier) {
	d.unsettled, d.since = 0, time.Time{}
	if m, err := readMarks(ctx, q); err == nil {
		d.marks, d.catalogPending = m, false
	}
}

// Unsettled is how many commits of this handle may still be in the WAL
// only, not yet checkpointed into the database file.
func (d *DB) Unsettled() int { return d.unsettled }

// Settle checkpoints the commits this handle left in the WAL (none: it
// does nothing), passing FaultSettle and FaultAfterSettle to the open's
// fault hook. A failure leaves them in the WAL, committed: the next
// settle, close or open writes them into the file.
func (d *DB) Settle(ctx context.Context) error {
	if d.readOnly || d.unsettled == 0 {
		return nil
	}
	if !hasWAL(d.path) { // DuckDB checkpointed at its threshold
		d.settled(ctx, d.sql)
		return nil
	}
	if d.opts.Fault != nil {
		d.opts.Fault(FaultSettle)
	}
	if _, err := d.sql.ExecContext(ctx, "CHECKPOINT"); err != nil {
		return fmt.Errorf("checkpoint %s: %w", d.path, err)
	}
	if d.opts.Fault != nil {
		d.opts.Fault(FaultAfterSettle)
	}
	d.settled(ctx, d.sql)
	return nil
}
