package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/idem-dev/idem/publish/iceberg/publisher"
	"github.com/idem-dev/idem/runner"
	"github.com/stretchr/testify/require"
)

// Publishing that runs unattended (issue 47): no snapshot blocks the ones
// after it, a failed publish fails the command, a table published from
// another history is refused, and no temporary copy outlives a command.
// SQLite catalog only: the PostgreSQL catalog is covered by the tests in
// main_test.go and nothing here depends on the catalog's kind.

// pipeVersion adds schema and transform version v to the project's
// pipeline: v3's columns plus flag of type typ, written as expr.
func (p *project) pipeVersion(v int, typ, expr string) {
	p.t.Helper()
	v3, err := os.ReadFile(filepath.Join(p.dir, "pipe/schema/v3.sql"))
	require.NoError(p.t, err)
	p.write(filepathf("pipe/schema/v%d.sql", v), strings.Replace(string(v3), "    decade     INTEGER\n", "    decade     INTEGER,\n    flag       "+typ+"\n", 1))
	require.NoError(p.t, os.CopyFS(filepath.Join(p.dir, filepathf("pipe/transform/v%d", v)), os.DirFS(filepath.Join(p.dir, "pipe/transform/v1"))))
	commit, err := os.ReadFile(filepath.Join(p.dir, "pipe/transform/v1/04_commit.sql"))
	require.NoError(p.t, err)
	p.write(filepathf("pipe/transform/v%d/04_commit.sql", v), strings.Replace(string(commit),
		"INSERT INTO {{table}} (id, species_id, year, license)\nSELECT id, species_id, year, license\n",
		"INSERT INTO {{table}} (id, species_id, year, license, decade, flag)\nSELECT id, species_id, year, license, year // 10, "+expr+"\n", 1))
}

func filepathf(format string, a ...any) string { return filepath.FromSlash(fmt.Sprintf(format, a...)) }

// useVersion points occ.toml at transform and schema version v.
func (p *project) useVersion(v int) {
	p.t.Helper()
	b, err := os.ReadFile(filepath.Join(p.dir, "occ.toml"))
	require.NoError(p.t, err)
	s := string(b)
	for _, k := range []string{"transform_version", "schema_version"} {
		i := strings.Index(s, k+" = ")
		j := strings.Index(s[i:], "\n")
		s = s[:i] + fmt.Sprintf("%s = %d", k, v) + s[i+j:]
	}
	p.write("occ.toml", s)
}

// TestNoChangeSnapshotPublished: an explicit empty replacement of a
// partition the table lacks commits an idem snapshot that changes no row;
// it is published (an Iceberg snapshot of no data change) and does not
// block the snapshot after it.
func TestNoChangeSnapshotPublished(t *testing.T) {
	t.Parallel()
	p := newProject(t, "")
	p.ok(idemIceberg, "run", "occ.toml")
	p.write("empty.csv", "id,species_id,year,license\n")
	r := p.run(idemIceberg, "run", "occ.toml", "--input", "empty.csv", "--partitions", "50")
	require.Equal(t, 0, r.code, r.stderr)
	require.NotContains(t, r.stderr, "warning", r.stderr)
	require.Contains(t, r.stdout, "published snapshot 2 (0 file(s)")
	p.write("occ47.csv", "id,species_id,year,license\n470,1,47,CC0 1.0\n")
	out := p.ok(idemIceberg, "run", "occ.toml", "--input", "occ47.csv", "--partitions", "47")
	require.Contains(t, out, "published snapshot 3")
	require.Equal(t, []int64{1, 2, 3}, p.verify("occ.toml"))
}

// TestRetypePublishedAsNewColumn: a column retyped in a way Iceberg's
// schema evolution cannot make (BOOLEAN to VARCHAR) is published as a new
// Iceberg column of the same name, said so, and blocks nothing; every
// snapshot reads back with its own type.
func TestRetypePublishedAsNewColumn(t *testing.T) {
	t.Parallel()
	p := newProject(t, "")
	p.pipeVersion(4, "BOOLEAN", "year > 46")
	p.pipeVersion(5, "VARCHAR", "CASE WHEN year > 46 THEN 'late' ELSE 'early' END")
	p.useVersion(4)
	p.ok(idemIceberg, "run", "occ.toml")
	p.useVersion(5)
	r := p.run(idemIceberg, "run", "occ.toml")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "column flag retyped boolean -> string, which Iceberg cannot promote: published as a new column flag (snapshots before 2 read the old one)")
	require.NotContains(t, r.stderr, "publishing to Iceberg failed")
	p.write("occ47.csv", "id,species_id,year,license\n470,1,47,CC0 1.0\n")
	require.Contains(t, p.ok(idemIceberg, "run", "occ.toml", "--input", "occ47.csv", "--partitions", "47"), "published snapshot 3")
	require.Equal(t, []int64{1, 2, 3}, p.verify("occ.toml"))
}

// TestPublishFailureExitsNonZero: when publishing after a commit fails,
// the commit stands and the command exits with the failure's code (here 1:
// the catalog cannot be opened), naming the catch-up command.
func TestPublishFailureExitsNonZero(t *testing.T) {
	t.Parallel()
	p := newProject(t, filepath.Join(t.TempDir(), "no-such-folder", "catalog.db"))
	r := p.run(idemIceberg, "run", "accounts.toml")
	require.Equal(t, 1, r.code, r.stdout+r.stderr)
	require.Contains(t, r.stderr, "the commit stands but publishing to Iceberg failed")
	require.Contains(t, r.stdout, "snapshot  1", "the commit stands")
}

// copyFile copies file from to to.
func (p *project) copyFile(from, to string) {
	p.t.Helper()
	b, err := os.ReadFile(filepath.Join(p.dir, from))
	require.NoError(p.t, err)
	require.NoError(p.t, os.WriteFile(filepath.Join(p.dir, to), b, 0o644))
}

// TestDivergedTableRefused: a database restored from a backup that moves
// on differently, or recreated beside its table, is refused (exit 3)
// naming both histories, by run and by publish, rather than publishing on
// top of the other history or saying "nothing new"; --verify names the
// summary property that differs; --republish publishes this database's
// history in place of the table's.
func TestDivergedTableRefused(t *testing.T) {
	t.Parallel()
	p := newProject(t, "")
	p.ok(idemIceberg, "run", "accounts.toml")
	p.copyFile("idem.duckdb", "backup.duckdb")
	p.ok(idemIceberg, "run", "accounts.toml", "--input", "changes/batch-2.jsonl")
	published2 := p.verify("accounts.toml")
	require.Equal(t, []int64{1, 2}, published2)

	p.copyFile("backup.duckdb", "idem.duckdb") // restored: ends at snapshot 1
	r := p.run(idemIceberg, "publish", "accounts.toml")
	require.Equal(t, 3, r.code, r.stdout+r.stderr)
	require.Contains(t, r.stderr, "the table holds idem snapshot 2 of job key ")
	require.Contains(t, r.stderr, "this database (id ")
	require.Contains(t, r.stderr, ") ends at snapshot 1")
	r = p.run(idemIceberg, "run", "accounts.toml", "--input", "changes/batch-3.jsonl") // moves on differently
	require.Equal(t, 3, r.code, r.stdout+r.stderr)
	require.Contains(t, r.stdout, "snapshot  2", "the commit stands")
	require.Contains(t, r.stderr, "the table holds idem snapshot 2 of job key ")
	require.Regexp(t, `this database \(id [^)]+\) has snapshot 2 of job key [0-9a-f]{64}`, r.stderr)
	require.Contains(t, r.stderr, "idem-iceberg publish accounts.toml --republish")
	r = p.run(idemIceberg, "publish", "accounts.toml", "--verify")
	require.Equal(t, 1, r.code, r.stdout+r.stderr)
	require.Contains(t, r.stderr, "Iceberg snapshot ")
	require.Contains(t, r.stderr, "summary property idem.job_key is ")

	out := p.ok(idemIceberg, "publish", "accounts.toml", "--republish")
	require.Contains(t, out, "published snapshot 1, 2 ")
	require.Contains(t, out, "in place of the table's history (--republish)")
	require.Equal(t, []int64{1, 2}, p.verify("accounts.toml"))

	// Recreated beside its table: the same input, a new database id.
	require.NoError(t, os.Remove(filepath.Join(p.dir, "idem.duckdb")))
	require.NoError(t, os.RemoveAll(filepath.Join(p.dir, "idem.duckdb.inputs")))
	r = p.run(idemIceberg, "run", "accounts.toml")
	require.Equal(t, 3, r.code, r.stdout+r.stderr)
	require.Contains(t, r.stderr, "another history")
	r = p.run(idemIceberg, "publish", "accounts.toml", "--verify")
	require.Equal(t, 1, r.code, r.stdout+r.stderr)
	require.Contains(t, r.stderr, "summary property idem.database_id is ")
}

// filesIn lists the files under dir, relative to it.
func filesIn(t *testing.T, dir string) []string {
	var files []string
	_ = filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			rel, _ := filepath.Rel(dir, path)
			files = append(files, rel)
		}
		return nil
	})
	return files
}

// TestKilledWhileHashing: a publisher killed while it hashes a snapshot's
// export leaves the plaintext export beside the database, never in the
// system's temporary folder; the next publisher removes it, and an
// erasure removes it before it commits.
func TestKilledWhileHashing(t *testing.T) {
	t.Parallel()
	p := newProject(t, "")
	tmp := t.TempDir()
	temps := filepath.Join(p.dir, "idem.duckdb.publish-tmp")
	p.env = []string{"TMPDIR=" + tmp}
	killed := func() {
		t.Helper()
		p.env = append(p.env, "IDEM_FAULT="+publisher.FaultWhileHashing)
		r := p.run(idemIceberg, "publish", "accounts.toml")
		p.env = p.env[:1]
		require.Equal(t, -1, r.code, r.stdout+r.stderr)
		require.Len(t, filesIn(t, temps), 1, "the killed publisher's export")
	}
	p.ok(idemCore, "run", "accounts.toml")
	killed()
	p.publish("accounts.toml")
	require.Empty(t, filesIn(t, temps), "the next publisher removes the killed one's export")
	require.Empty(t, filesIn(t, tmp))

	p.ok(idemCore, "run", "accounts.toml", "--input", "changes/batch-2.jsonl")
	killed()
	p.env = append(p.env, "IDEM_FAULT=after_commit") // killed after the erasure's commit, before publishing
	r := p.run(idemIceberg, "erase", "accounts.toml", "--key", "account-2")
	p.env = p.env[:1]
	require.Equal(t, -1, r.code, r.stdout+r.stderr)
	require.Empty(t, filesIn(t, temps), "the erasure removes the killed publisher's export")
	require.Empty(t, filesIn(t, tmp))
	p.publish("accounts.toml")
	require.Empty(t, p.lakeHolds("account-2"))
}

// TestCoreEraseOfPublishingJobRefused: the idem binary, which does not
// publish, refuses (exit 3) to erase a subject from a job declaring
// [publish.iceberg], committing nothing, so that the lake never serves an
// erased subject unannounced; idem-iceberg erases and publishes at once.
func TestCoreEraseOfPublishingJobRefused(t *testing.T) {
	t.Parallel()
	p := newProject(t, "")
	p.ok(idemIceberg, "run", "accounts.toml")
	before := p.ok(idemCore, "log", "accounts.toml", "--json")
	r := p.run(idemCore, "erase", "accounts.toml", "--key", "account-2")
	require.Equal(t, 3, r.code, r.stdout+r.stderr)
	require.Contains(t, r.stderr, "accounts declares [publish.iceberg] and this idem binary does not publish")
	require.Contains(t, r.stderr, "Erase with idem-iceberg erase")
	require.Equal(t, before, p.ok(idemCore, "log", "accounts.toml", "--json"), "nothing committed")
	require.NotEmpty(t, p.lakeHolds("account-2"))
	require.Contains(t, p.ok(idemCore, "erase", "accounts.toml", "--key", "account-2", "--dry-run"), "account-2")

	require.Contains(t, p.ok(idemIceberg, "erase", "accounts.toml", "--key", "account-2"), "again without the erased rows")
	require.Empty(t, p.lakeHolds("account-2"))
}

// TestErasedPartitionValueInNoManifest: a subject that is a partition
// value (the table is partitioned by the subject column) is, after its
// erasure is published, in no file of the warehouse: not in a data file,
// and not in the partition tuple or bounds of a manifest entry (a DELETED
// entry of a manifest a kept snapshot still references).
func TestErasedPartitionValueInNoManifest(t *testing.T) {
	t.Parallel()
	p := newProject(t, "")
	p.write("lic.csv", "id,species_id,year,license\n1,1,45,CC0 1.0\n2,1,46,CC0 1.0\n3,2,46,CC BY 4.0\n")
	p.job("lic.toml", `name = "lic"
pipeline = "pipe"
transform_version = 1
schema_version = 1
params = { licenses = ["CC0 1.0", "CC BY 4.0"] }
[input]
path = "lic.csv"
[target]
partition_by = "license"
[privacy]
subject = ["license"]
`)
	p.ok(idemIceberg, "run", "lic.toml")
	p.write("lic2.csv", "id,species_id,year,license\n1,1,45,CC0 1.0\n2,1,47,CC0 1.0\n3,2,46,CC BY 4.0\n")
	p.ok(idemIceberg, "run", "lic.toml", "--input", "lic2.csv")
	require.NotEmpty(t, p.lakeHolds("CC BY 4.0"))
	require.Contains(t, p.ok(idemIceberg, "erase", "lic.toml", "--subject", "CC BY 4.0"), "again without the erased rows")
	require.Empty(t, p.lakeHolds("CC BY 4.0"))
	require.Equal(t, []int64{1, 2, 3}, p.verify("lic.toml"))
}

// TestApplyJobPublishedAsRowChanges: an apply job's snapshot after the
// first is published as its changes, not the whole table rewritten: new
// entities only as an Iceberg append (a streaming reader consumes it),
// updates and deletes as the changed rows plus an equality delete file of
// their keys; the key column is required and the schema's identifier
// field. Every snapshot reads back equal.
func TestApplyJobPublishedAsRowChanges(t *testing.T) {
	t.Parallel()
	p := newProject(t, "")
	p.ok(idemCore, "run", "accounts.toml")
	require.Equal(t, "append", p.publish("accounts.toml").Published[0].Operation) // the first: the whole table, into an empty one
	p.write("new.jsonl", `{"change_id":"n-001","entity_id":"account-90","source_version":1,"operation":"upsert","value":"gold"}`+"\n")
	p.ok(idemCore, "run", "accounts.toml", "--input", "new.jsonl")
	rep := p.publish("accounts.toml")
	require.Equal(t, "append", rep.Published[0].Operation, "new entities only: an append")
	require.Equal(t, 1, rep.Published[0].Files)
	require.Zero(t, rep.Published[0].Removed)
	p.ok(idemCore, "run", "accounts.toml", "--input", "changes/batch-2.jsonl")
	rep = p.publish("accounts.toml")
	require.Equal(t, "overwrite", rep.Published[0].Operation)
	require.Equal(t, 2, rep.Published[0].Files, "the changed rows and an equality delete file")
	require.Positive(t, rep.Published[0].Deleted)
	require.Zero(t, rep.Published[0].Removed, "no data file rewritten")
	require.Equal(t, []int64{1, 2, 3}, p.verify("accounts.toml"))

	cat, err := publisher.OpenCatalog(t.Context(), &runner.IcebergTable{Catalog: p.catalog, Warehouse: "file://" + p.lake, Namespace: "analytics"})
	require.NoError(t, err)
	defer cat.Close()
	tbl, err := cat.LoadTable(t.Context(), []string{"analytics", "accounts"})
	require.NoError(t, err)
	key, ok := tbl.Schema().FindFieldByName("entity_id")
	require.True(t, ok)
	require.True(t, key.Required)
	require.Equal(t, []int{key.ID}, tbl.Schema().IdentifierFieldIDs)
}
