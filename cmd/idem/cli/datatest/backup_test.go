package datatest

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/idem-dev/idem/internal/report"

	"github.com/idem-dev/idem/cmd/idem/cli/internal/clitest"
	"github.com/idem-dev/idem/internal/dbfile"
	"github.com/stretchr/testify/require"
)

func backupOK(t *testing.T, db, out string) dbfile.BackupResult {
	t.Helper()
	r := clitest.CallIdem(t, "backup", "--db", db, "--out", out, "--json")
	require.Equal(t, 0, r.Code, "backup: %s", r.Stderr)
	var res dbfile.BackupResult
	require.NoError(t, json.Unmarshal([]byte(r.Stdout), &res), r.Stdout)
	return res
}

// TestBackupRestore: a backup holds the database and every retained input
// with a manifest that --verify checks; restored into a fresh folder it
// holds every table as the database did, rerun reproduces every snapshot
// from it, a replayed batch is already committed and the next batch
// applies. The backup changes nothing in the database.
func TestBackupRestore(t *testing.T) {
	t.Parallel()
	j := clitest.CompactJob(t)
	before, sums := clitest.CaptureState(t, j.DB), exportAll(t, j)
	out := filepath.Join(j.Dir, "backup")
	res := backupOK(t, j.DB, out)
	require.Equal(t, before, clitest.CaptureState(t, j.DB), "backup changed the database")
	require.Equal(t, "idem.duckdb", res.Database)
	require.Equal(t, commitPoint(t, j), fmt.Sprint([][]any{{res.DatabaseID, res.Commit}}))

	var m dbfile.BackupManifest
	b, err := os.ReadFile(filepath.Join(out, dbfile.BackupManifestName))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &m))
	stored := clitest.StoreFiles(t, j.DB)
	require.NotEmpty(t, stored)
	require.Len(t, m.Files, len(stored)+1, "the manifest lists the database and every retained input")
	require.Equal(t, res.Files, len(m.Files))
	r := clitest.CallIdem(t, "backup", "--verify", out, "--json")
	require.Equal(t, 0, r.Code, r.Stderr)

	db := clitest.Restore(t, out)
	require.Equal(t, before, clitest.CaptureState(t, db), "the restored database")
	for s, sum := range sums {
		r := clitest.CallIdem(t, "export", j.File, "--db", db, "--snapshot", fmt.Sprint(s), "--out", filepath.Join(t.TempDir(), "e.csv"), "--json")
		require.Equal(t, 0, r.Code, r.Stderr)
		require.Contains(t, r.Stdout, `"sha256":"`+sum+`"`, "snapshot %d exported from the restored database", s)
		r = clitest.CallIdem(t, "rerun", j.File, "--db", db, "--snapshot", fmt.Sprint(s), "--json")
		require.Equal(t, 0, r.Code, "rerun of snapshot %d on the restored database: %s", s, r.Stderr)
		require.Contains(t, r.Stdout, `"reproduced":true`, "snapshot %d", s)
	}
	res2 := clitest.CallIdem(t, "run", j.File, "--db", db, "--input", clitest.ChangesFixture(t, "batch-2.jsonl"), "--json")
	require.Equal(t, 0, res2.Code, res2.Stderr)
	require.Contains(t, res2.Stdout, `"decision":"already_committed"`)
	res2 = clitest.CallIdem(t, "run", j.File, "--db", db, "--input", clitest.ChangesFixture(t, "batch-3.jsonl"), "--json")
	require.Equal(t, 0, res2.Code, res2.Stderr)
	require.Contains(t, res2.Stdout, `"decision":"applied"`)
	require.Equal(t, before, clitest.CaptureState(t, j.DB), "the restored copy is a database of its own")

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
		{"extra", func(dir string) { clitest.WriteFile(t, filepath.Join(dir, "idem.duckdb.wal"), "x") }, "idem.duckdb.wal is not in the manifest"},
		// What the manifest says is checked against the folder, and the
		// database file against the manifest.
		{"database and its entry removed", func(dir string) {
			require.NoError(t, os.Remove(filepath.Join(dir, "idem.duckdb")))
			editManifest(t, dir, func(m map[string]any) { m["files"] = m["files"].([]any)[1:] })
		}, `the manifest does not list its database file "idem.duckdb"`},
		{"no files listed", func(dir string) {
			require.NoError(t, os.RemoveAll(filepath.Join(dir, "idem.duckdb.inputs")))
			require.NoError(t, os.Remove(filepath.Join(dir, "idem.duckdb")))
			editManifest(t, dir, func(m map[string]any) { m["files"] = []any{} })
		}, "does not list its database file"},
		{"a link to a database", func(dir string) {
			require.NoError(t, os.Remove(filepath.Join(dir, "idem.duckdb")))
			require.NoError(t, os.Symlink(filepath.Join(out, "idem.duckdb"), filepath.Join(dir, "idem.duckdb")))
		}, "idem.duckdb is not a regular file"},
		{"database id edited", func(dir string) {
			editManifest(t, dir, func(m map[string]any) { m["database_id"] = "00000000-0000-0000-0000-000000000000" })
		}, "the manifest says database 00000000-0000-0000-0000-000000000000"},
		{"commit edited", func(dir string) {
			editManifest(t, dir, func(m map[string]any) { m["commit"] = m["commit"].(float64) + 1 })
		}, "; the manifest says database"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "b")
			clitest.CopyDir(t, out, dir)
			tc.damage(dir)
			r := clitest.CallIdem(t, "backup", "--verify", dir)
			require.Equal(t, report.ExitFailure, r.Code, r.Stderr)
			require.Contains(t, r.Stderr, tc.msg)
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
			j := clitest.AppliedGuardJob(t)
			before := clitest.CaptureState(t, j.DB)
			args := []string{tc.cmd, "--db", j.DB}
			if tc.cmd == "backup" {
				args = append(args, "--out", filepath.Join(j.Dir, "backup"))
			}
			held := clitest.StartBlocked(t, "", tc.point, args...)
			for _, other := range [][]string{
				{"run", j.File, "--input", clitest.ChangesFixture(t, "batch-2.jsonl")},
				{"erase", j.File, "--key", "account-1"},
				{"compact", "--db", j.DB},
				{"backup", "--db", j.DB, "--out", filepath.Join(j.Dir, "other")},
			} {
				r := clitest.CallIdem(t, other...)
				require.Equal(t, report.ExitLocked, r.Code, "%s during %s at %s: %s", other[0], tc.cmd, tc.point, r.Stderr)
			}
			code, _, stderr := held.Wait(t)
			require.Equal(t, 0, code, stderr)
			require.Equal(t, before, clitest.CaptureState(t, j.DB))
			require.NoDirExists(t, filepath.Join(j.Dir, "other"))
		})
	}
	t.Run("run_holds", func(t *testing.T) {
		t.Parallel()
		j := clitest.AppliedGuardJob(t)
		held := clitest.StartBlocked(t, "", "before_commit", "run", j.File, "--input", clitest.ChangesFixture(t, "batch-2.jsonl"))
		for _, args := range [][]string{{"compact", "--db", j.DB}, {"backup", "--db", j.DB, "--out", filepath.Join(j.Dir, "b")}} {
			r := clitest.CallIdem(t, args...)
			require.Equal(t, report.ExitLocked, r.Code, "%s during a run: %s", args[0], r.Stderr)
		}
		code, _, stderr := held.Wait(t)
		require.Equal(t, 0, code, stderr)
		require.NoDirExists(t, filepath.Join(j.Dir, "b"))
	})
}

// TestCompactReplica: compact publishes a read replica in place again,
// from the new file: it holds the same tables, and after an erasure no
// byte of the subject.
func TestCompactReplica(t *testing.T) {
	t.Parallel()
	j := appliedReplicaJob(t)
	res := clitest.CompactOK(t, j.DB)
	require.NotNil(t, res.Replica, "compact reports the replica it published")
	require.Empty(t, res.Replica.Error)
	require.Equal(t, int64(2), replicaSnapshot(t, j.Replica()))
	require.True(t, statesEqual(clitest.CaptureState(t, j.DB), replicaState(t, j.Replica())))

	r := clitest.CallIdem(t, "erase", j.File, "--key", "subject-9")
	require.Equal(t, 0, r.Code, r.Stderr)
	res = clitest.CompactOK(t, j.DB)
	require.NotNil(t, res.Replica)
	require.Empty(t, res.Replica.Error)
	require.True(t, statesEqual(clitest.CaptureState(t, j.DB), replicaState(t, j.Replica())))
	require.False(t, clitest.FileHolds(t, j.DB, replicaPayload))
	require.False(t, clitest.FileHolds(t, j.Replica(), replicaPayload))
}

// TestReplicaPublicationKeepsTheLock: publishing the read replica copies
// the database file while the writer holds it; closing that copy's
// descriptor must not drop the writer's lock (POSIX drops every lock of a
// process on a file when any descriptor of it closes), so another writer
// still gets exit 4 after the publication.
func TestReplicaPublicationKeepsTheLock(t *testing.T) {
	t.Parallel()
	j := newReplicaJob(t)
	j.Apply("--input", filepath.Join(j.Dir, "b1.jsonl"))
	held := clitest.StartBlocked(t, "", "replica_after_rename", "run", j.File, "--input", filepath.Join(j.Dir, "b2.jsonl"))
	r := j.Run("--input", filepath.Join(j.Dir, "b3.jsonl"))
	require.Equal(t, report.ExitLocked, r.Code, "a second writer after the replica's publication: %s", r.Stderr)
	code, _, stderr := held.Wait(t)
	require.Equal(t, 0, code, stderr)
	require.Equal(t, int64(2), replicaSnapshot(t, j.Replica()))
}

// editManifest rewrites a backup's manifest after edit.
func editManifest(t *testing.T, dir string, edit func(map[string]any)) {
	t.Helper()
	p := filepath.Join(dir, dbfile.BackupManifestName)
	b, err := os.ReadFile(p)
	require.NoError(t, err)
	var m map[string]any
	require.NoError(t, json.Unmarshal(b, &m))
	edit(m)
	b, err = json.Marshal(m)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(p, b, 0o644))
}
