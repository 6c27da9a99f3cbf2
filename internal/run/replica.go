package run

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/idem-dev/idem/internal/sqltext"
)

// Fault points of a replica's publication ([duckdb] read_replica): the copy
// is complete and synced under its temporary name, and it has been renamed
// into place before its folder is synced.
const (
	FaultReplicaBeforeRename = "replica_before_rename"
	FaultReplicaAfterRename  = "replica_after_rename"
)

// replicaTag names the file a replica is built in before it is renamed into
// place: <db>.read.duckdb.tmp-<pid>-<random>.
const replicaTag = "tmp"

// replicaCatalog and replicaCheckCatalog are the names the replica being
// built and the replica in place are attached under in the writer's
// DuckDB.
const (
	replicaCatalog      = "idem_replica_new"
	replicaCheckCatalog = "idem_replica_old"
)

// ReplicaPath is where the read replica of the database at path is
// published: <path>.read.duckdb.
func ReplicaPath(path string) string { return path + ".read.duckdb" }

// ReplicaInfo reports one publication of the read replica.
type ReplicaInfo struct {
	Path    string  `json:"path"`
	Seconds float64 `json:"seconds"`
	Bytes   int64   `json:"bytes"`
	// Method is how the file was made: clone (a reflink, no data copied),
	// copy (copy_file_range or a plain copy of the checkpointed file) or
	// rewrite (COPY FROM DATABASE, once the database holds an erasure: the
	// file's free blocks may still hold an erased subject's bytes).
	Method string `json:"method"`
	// Commit is the database's commit sequence (idem.commits) the replica
	// holds.
	Commit int64 `json:"commit"`
	// Error says why the publication failed; the commit stands and the
	// previous replica stays in place.
	Error string `json:"error,omitempty"`
}

// ReplicaSnapshot is the snapshot of one job a replica holds.
type ReplicaSnapshot struct {
	Job      string `json:"job"`
	Snapshot int64  `json:"snapshot"`
	JobKey   string `json:"job_key"`
}

// ReplicaNote says what a read replica holds: the commit it was published
// at and each job's snapshot (its table idem_replica.snapshots).
type ReplicaNote struct {
	Path        string
	Primary     string
	Commit      int64
	PublishedAt time.Time
	Snapshots   []ReplicaSnapshot
}

// Holds reports whether the replica holds snapshot s of job (s > 0): s is
// at most the job's snapshot there.
func (n *ReplicaNote) Holds(job string, s int64) bool {
	for _, r := range n.Snapshots {
		if r.Job == job {
			return s > 0 && s <= r.Snapshot
		}
	}
	return false
}

// PublishReplica publishes the read replica of a writable database opened
// with [duckdb] read_replica: it checkpoints, copies the database file
// under a temporary name beside it, records what it holds in
// idem_replica.snapshots, syncs it and renames it into place, then syncs
// the folder. A reader sees the previous replica or the new one, never a
// part. The caller must not write the database meanwhile (idem runs one
// job at a time per database). It returns nil when read_replica is off. A failure is reported in
// the info (Error) and leaves the previous replica: the commit it follows
// stands, and the next writable open publishes again.
func (d *DB) PublishReplica(ctx context.Context, fault func(string)) *ReplicaInfo {
	if d.readOnly || !d.replica {
		return nil
	}
	ctx = context.WithoutCancel(ctx) // a Ctrl-C after the commit still publishes
	start := time.Now()
	info := &ReplicaInfo{Path: ReplicaPath(d.path)}
	if err := d.publish(ctx, info, fault); err != nil {
		info.Error = err.Error()
	}
	info.Seconds = time.Since(start).Seconds()
	return info
}

func (d *DB) publish(ctx context.Context, info *ReplicaInfo, fault func(string)) error {
	conn, err := d.sql.Conn(ctx)
	if err != nil {
		return fmt.Errorf("publish replica: %w", err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "CHECKPOINT"); err != nil {
		return fmt.Errorf("publish replica: checkpoint: %w", err)
	}
	var erasures int64
	if err := conn.QueryRowContext(ctx, `SELECT (SELECT max(seq) FROM idem.commits), (SELECT count(*) FROM idem.erasures)`).
		Scan(&info.Commit, &erasures); err != nil {
		return fmt.Errorf("publish replica: %w", err)
	}
	out := info.Path
	sweepLeftovers(out, replicaTag)
	tmp := leftoverName(out, replicaTag)
	done := false
	defer func() {
		if !done {
			_ = os.Remove(tmp)
			_ = os.Remove(walPath(tmp))
		}
	}()
	if erasures > 0 {
		info.Method = "rewrite"
		err = rewriteInto(ctx, conn, tmp)
	} else if hasWAL(d.path) {
		// The checkpoint left commits in the WAL (a transaction of this
		// process was open): a copy of the file alone would lack them.
		err = errors.New("the WAL was not checkpointed")
	} else {
		before, _ := os.Stat(d.path)
		info.Method, err = d.copyTo(tmp)
		// Nothing else of this process may write the database meanwhile
		// (one job at a time per database); a change would tear the copy.
		if after, serr := os.Stat(d.path); err == nil && (serr != nil || before == nil ||
			after.Size() != before.Size() || !after.ModTime().Equal(before.ModTime()) || hasWAL(d.path)) {
			err = errors.New("the database changed during the copy")
		}
	}
	if err != nil {
		return fmt.Errorf("publish replica %s: %w", out, err)
	}
	if err := recordReplica(ctx, conn, tmp, info.Commit); err != nil {
		return fmt.Errorf("publish replica %s: %w", out, err)
	}
	if hasWAL(tmp) {
		return fmt.Errorf("publish replica %s: its WAL was not checkpointed", out)
	}
	if err := syncFile(tmp); err != nil {
		return fmt.Errorf("publish replica %s: %w", out, err)
	}
	if fault != nil {
		fault(FaultReplicaBeforeRename)
	}
	if err := os.Rename(tmp, out); err != nil {
		return fmt.Errorf("publish replica %s: %w", out, err)
	}
	done = true
	_ = os.Remove(walPath(tmp))
	if fault != nil {
		fault(FaultReplicaAfterRename)
	}
	if st, err := os.Stat(out); err == nil {
		info.Bytes = st.Size()
	}
	return syncDir(filepath.Dir(out))
}

// rewriteInto writes a new database at tmp holding the database's schemas,
// tables and views (COPY FROM DATABASE): only live rows reach it.
func rewriteInto(ctx context.Context, conn *sql.Conn, tmp string) error {
	if _, err := conn.ExecContext(ctx, "ATTACH "+sqltext.SQLString(tmp)+" AS "+replicaCatalog); err != nil {
		return fmt.Errorf("attach: %w", err)
	}
	_, err := conn.ExecContext(ctx, "COPY FROM DATABASE "+storeCatalog+" TO "+replicaCatalog)
	if _, derr := conn.ExecContext(ctx, "DETACH "+replicaCatalog); derr != nil && err == nil {
		err = fmt.Errorf("detach: %w", derr)
	}
	return err
}

// copyFile copies the checkpointed database file in, from its start, to
// dst: a reflink where the file system has them (clone), else
// copy_file_range, which Go's io.Copy between two files uses on Linux, or
// a plain copy (copy). The caller keeps in open (see DB.self).
func copyFile(in *os.File, dst string) (string, error) {
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return "", err
	}
	method := "copy"
	if cloneFile(out, in) == nil {
		method = "clone"
	} else {
		_, err = io.Copy(out, in)
	}
	return method, errors.Join(err, out.Close())
}

// recordReplica writes idem_replica.snapshots into the replica at tmp: each
// job's snapshot and job key as of commit seq, and when it was published.
func recordReplica(ctx context.Context, conn *sql.Conn, tmp string, seq int64) error {
	if _, err := conn.ExecContext(ctx, "ATTACH "+sqltext.SQLString(tmp)+" AS "+replicaCatalog); err != nil {
		return fmt.Errorf("attach: %w", err)
	}
	_, err := conn.ExecContext(ctx, `CREATE SCHEMA IF NOT EXISTS `+replicaCatalog+`.idem_replica;
CREATE OR REPLACE TABLE `+replicaCatalog+`.idem_replica.snapshots AS
SELECT job, snapshot, job_key, CAST(? AS BIGINT) AS commit_seq, CAST(current_timestamp AS TIMESTAMP) AS published_at
FROM `+replicaCatalog+`.idem.jobs ORDER BY job`, seq)
	if err == nil {
		_, err = conn.ExecContext(ctx, "CHECKPOINT "+replicaCatalog)
	}
	if _, derr := conn.ExecContext(ctx, "DETACH "+replicaCatalog); derr != nil && err == nil {
		err = fmt.Errorf("detach: %w", derr)
	}
	if err != nil {
		return fmt.Errorf("record snapshots: %w", err)
	}
	return nil
}

func syncFile(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	return errors.Join(f.Sync(), f.Close())
}

// replicaStale reports whether the replica in place is missing, unreadable,
// of another database, or older than the database's latest commit.
func (d *DB) replicaStale(ctx context.Context) bool {
	out := ReplicaPath(d.path)
	if _, err := os.Stat(out); err != nil {
		return true
	}
	conn, err := d.sql.Conn(ctx)
	if err != nil {
		return true
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "ATTACH "+sqltext.SQLString(out)+" AS "+replicaCheckCatalog+" (READ_ONLY)"); err != nil {
		return true
	}
	defer conn.ExecContext(ctx, "DETACH "+replicaCheckCatalog) //nolint:errcheck
	var same bool
	err = conn.QueryRowContext(ctx, `SELECT
		(SELECT max(seq) FROM `+replicaCheckCatalog+`.idem.commits) = (SELECT max(seq) FROM idem.commits)
		AND (SELECT db_id FROM `+replicaCheckCatalog+`.idem.commits WHERE seq = 0) = (SELECT db_id FROM idem.commits WHERE seq = 0)
		AND (SELECT max(commit_seq) FROM `+replicaCheckCatalog+`.idem_replica.snapshots) IS NOT DISTINCT FROM
		    CASE WHEN (SELECT count(*) FROM idem.jobs) > 0 THEN (SELECT max(seq) FROM idem.commits) END`).Scan(&same)
	return err != nil || !same
}

// openReplica opens the read replica of the database at path read-only
// and reads what it holds. A missing replica gives an error wrapping
// fs.ErrNotExist.
func openReplica(ctx context.Context, path string, opts OpenOptions) (*DB, error) {
	out := ReplicaPath(path)
	if _, err := os.Stat(out); err != nil {
		return nil, err
	}
	ro := opts
	ro.ReadOnly, ro.Wait = true, 0
	ro.DuckDB.TempDirectory = "" // a reader spills nothing
	d, err := Open(ctx, out, ro)
	if err != nil {
		return nil, err
	}
	note := &ReplicaNote{Path: out, Primary: path}
	rows, err := d.sql.QueryContext(ctx, `SELECT job, snapshot, coalesce(job_key, ''), commit_seq, published_at FROM idem_replica.snapshots ORDER BY job`)
	if err == nil {
		for rows.Next() {
			var s ReplicaSnapshot
			if err = rows.Scan(&s.Job, &s.Snapshot, &s.JobKey, &note.Commit, &note.PublishedAt); err != nil {
				break
			}
			note.Snapshots = append(note.Snapshots, s)
		}
		err = errors.Join(err, rows.Err(), rows.Close())
	}
	if err != nil {
		d.Close()
		return nil, fmt.Errorf("read replica %s: %w", out, err)
	}
	d.note = note
	return d, nil
}

// WithdrawReplica removes the database's read replica, if any, whether or
// not read_replica is on: an erasure calls it before its commit, so that
// no replica holds the subject once the erasure is committed. Readers that
// opened the replica before keep reading what they opened.
func (d *DB) WithdrawReplica() error {
	out := ReplicaPath(d.path)
	if err := os.Remove(out); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return fmt.Errorf("remove replica %s: %w", out, err)
	}
	return syncDir(filepath.Dir(out))
}
