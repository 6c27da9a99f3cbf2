package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/idem-dev/idem/internal/job"
	"github.com/idem-dev/idem/internal/ops"

	"github.com/stretchr/testify/require"
)

func backupOK(t *testing.T, db, out string) ops.BackupResult {
	t.Helper()
	r := callIdem(t, "backup", "--db", db, "--out", out, "--json")
	require.Equal(t, 0, r.code, "backup: %s", r.stderr)
	var res ops.BackupResult
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &res), r.stdout)
	return res
}

// restore copies a backup folder's files, the manifest aside, into a new
// folder as the README says, and returns the restored database's path.
func restore(t *testing.T, backup string) string {
	t.Helper()
	to := filepath.Join(t.TempDir(), "restored")
	copyDir(t, backup, to)
	require.NoError(t, os.Remove(filepath.Join(to, ops.BackupManifestName)))
	return filepath.Join(to, "idem.duckdb")
}

// TestBackupRestore: a backup holds the database and every retained input
// with a manifest that --verify checks; restored into a fresh folder it
// holds every table as the database did, rerun reproduces every snapshot
// from it, a replayed batch is already committed and the next batch
// applies. The backup changes nothing in the database.
func TestBackupRestore(t *testing.T) {
	t.Parallel()
	j := compactJob(t)
	before, sums := captureState(t, j.db), exportAll(t, j)
	out := filepath.Join(j.dir, "backup")
	res := backupOK(t, j.db, out)
	require.Equal(t, before, captureState(t, j.db), "backup changed the database")
	require.Equal(t, "idem.duckdb", res.Database)
	require.Equal(t, commitPoint(t, j), fmt.Sprint([][]any{{res.DatabaseID, res.Commit}}))

	var m ops.BackupManifest
	b, err := os.ReadFile(filepath.Join(out, ops.BackupManifestName))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &m))
	stored := storeFiles(t, j.db)
	require.NotEmpty(t, stored)
	require.Len(t, m.Files, len(stored)+1, "the manifest lists the database and every retained input")
	require.Equal(t, res.Files, len(m.Files))
	r := callIdem(t, "backup", "--verify", out, "--json")
	require.Equal(t, 0, r.code, r.stderr)

	db := restore(t, out)
	require.Equal(t, before, captureState(t, db), "the restored database")
	for s, sum := range sums {
		r := callIdem(t, "export", j.file, "--db", db, "--snapshot", fmt.Sprint(s), "--out", filepath.Join(t.TempDir(), "e.csv"), "--json")
		require.Equal(t, 0, r.code, r.stderr)
		require.Contains(t, r.stdout, `"sha256":"`+sum+`"`, "snapshot %d exported from the restored database", s)
		r = callIdem(t, "rerun", j.file, "--db", db, "--snapshot", fmt.Sprint(s), "--json")
		require.Equal(t, 0, r.code, "rerun of snapshot %d on the restored database: %s", s, r.stderr)
		require.Contains(t, r.stdout, `"reproduced":true`, "snapshot %d", s)
	}
	res2 := callIdem(t, "run", j.file, "--db", db, "--input", changesFixture(t, "batch-2.jsonl"), "--json")
	require.Equal(t, 0, res2.code, res2.stderr)
	require.Contains(t, res2.stdout, `"decision":"already_committed"`)
	res2 = callIdem(t, "run", j.file, "--db", db, "--input", changesFixture(t, "batch-3.jsonl"), "--json")
	require.Equal(t, 0, res2.code, res2.stderr)
	require.Contains(t, res2.stdout, `"decision":"applied"`)
	require.Equal(t, before, captureState(t, j.db), "the restored copy is a database of its own")

	// --verify finds a damaged, a missing and an extra file.
	for _, tc := range []struct {
		name   string
		damage func(dir string)
		msg    string
	}{
		{"damaged", func(dir string) {
			p := filepath.Join(dir, filepath.FromSlash(m.Files[1].Path))
			require.NoError(t, os.WriteFile(p, []byte("not the input"), 0o644))
		}, "the manifest says"},
		{"missing", func(dir string) { require.NoError(t, os.Remove(filepath.Join(dir, "idem.duckdb"))) }, "no such file"},
		{"extra", func(dir string) { writeFile(t, filepath.Join(dir, "idem.duckdb.wal"), "x") }, "idem.duckdb.wal is not in the manifest"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "b")
			copyDir(t, out, dir)
			tc.damage(dir)
			r := callIdem(t, "backup", "--verify", dir)
			require.Equal(t, job.ExitFailure, r.code, r.stderr)
			require.Contains(t, r.stderr, tc.msg)
		})
	}
}

// TestCompactAndBackupHoldTheDatabase: while compact or backup runs, at
// each of its stages (held there by IDEM_FAULT=block:<point>), the
// database is held as by a writer: a run, an erase, another compact or
// backup get exit 4 and change nothing, and the held command then
// finishes. While a run holds the database, compact
// and backup get exit 4.
func TestCompactAndBackupHoldTheDatabase(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		cmd, point string
	}{
		{"compact", "compact_written"},
		// DuckDB has closed the file; compact's own lock holds it.
		{"compact", "compact_before_rename"},
		{"backup", "backup_copied"},
	} {
		t.Run(tc.point, func(t *testing.T) {
			t.Parallel()
			j := appliedGuardJob(t)
			before := captureState(t, j.db)
			args := []string{tc.cmd, "--db", j.db}
			if tc.cmd == "backup" {
				args = append(args, "--out", filepath.Join(j.dir, "backup"))
			}
			held := startBlocked(t, "", tc.point, args...)
			for _, other := range [][]string{
				{"run", j.file, "--input", changesFixture(t, "batch-2.jsonl")},
				{"erase", j.file, "--key", "account-1"},
				{"compact", "--db", j.db},
				{"backup", "--db", j.db, "--out", filepath.Join(j.dir, "other")},
			} {
				r := callIdem(t, other...)
				require.Equal(t, job.ExitLocked, r.code, "%s during %s at %s: %s", other[0], tc.cmd, tc.point, r.stderr)
			}
			code, _, stderr := held.wait(t)
			require.Equal(t, 0, code, stderr)
			require.Equal(t, before, captureState(t, j.db))
			require.NoDirExists(t, filepath.Join(j.dir, "other"))
		})
	}
	t.Run("run_holds", func(t *testing.T) {
		t.Parallel()
		j := appliedGuardJob(t)
		held := startBlocked(t, "", "before_commit", "run", j.file, "--input", changesFixture(t, "batch-2.jsonl"))
		for _, args := range [][]string{{"compact", "--db", j.db}, {"backup", "--db", j.db, "--out", filepath.Join(j.dir, "b")}} {
			r := callIdem(t, args...)
			require.Equal(t, job.ExitLocked, r.code, "%s during a run: %s", args[0], r.stderr)
		}
		code, _, stderr := held.wait(t)
		require.Equal(t, 0, code, stderr)
		require.NoDirExists(t, filepath.Join(j.dir, "b"))
	})
}

// TestCompactReplica: compact publishes a read replica in place again,
// from the new file: it holds the same tables, and after an erasure no
// byte of the subject.
func TestCompactReplica(t *testing.T) {
	t.Parallel()
	j := appliedReplicaJob(t)
	res := compactOK(t, j.db)
	require.NotNil(t, res.Replica, "compact reports the replica it published")
	require.Empty(t, res.Replica.Error)
	require.Equal(t, int64(2), replicaSnapshot(t, j.replica()))
	require.True(t, statesEqual(captureState(t, j.db), replicaState(t, j.replica())))

	r := callIdem(t, "erase", j.file, "--key", "subject-9")
	require.Equal(t, 0, r.code, r.stderr)
	res = compactOK(t, j.db)
	require.NotNil(t, res.Replica)
	require.Empty(t, res.Replica.Error)
	require.True(t, statesEqual(captureState(t, j.db), replicaState(t, j.replica())))
	require.False(t, fileHolds(t, j.db, replicaPayload))
	require.False(t, fileHolds(t, j.replica(), replicaPayload))
}

// TestReplicaPublicationKeepsTheLock: publishing the read replica copies
// the database file while the writer holds it; closing that copy's
// descriptor must not drop the writer's lock (POSIX drops every lock of a
// process on a file when any descriptor of it closes), so another writer
// still gets exit 4 after the publication.
func TestReplicaPublicationKeepsTheLock(t *testing.T) {
	t.Parallel()
	j := newReplicaJob(t)
	j.apply("--input", filepath.Join(j.dir, "b1.jsonl"))
	held := startBlocked(t, "", "replica_after_rename", "run", j.file, "--input", filepath.Join(j.dir, "b2.jsonl"))
	r := j.run("--input", filepath.Join(j.dir, "b3.jsonl"))
	require.Equal(t, job.ExitLocked, r.code, "a second writer after the replica's publication: %s", r.stderr)
	code, _, stderr := held.wait(t)
	require.Equal(t, 0, code, stderr)
	require.Equal(t, int64(2), replicaSnapshot(t, j.replica()))
}
