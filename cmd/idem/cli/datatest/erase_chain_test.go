package datatest

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/idem-dev/idem/cmd/idem/cli/internal/clitest"
	"github.com/stretchr/testify/require"
)

// eraseChainProject writes the chain of issue 26 into dir: vc
// (versioned_changes, subject entity_id, checkpoints every snapshot) →
// src (a model of vc's active rows) and agg (an aggregate model over vc)
// → down (merge_by_key applying src's changes), every job with retention
// and the read replica on, the database in dir/db. Two change files.
func eraseChainProject(t *testing.T, dir string) {
	settings := "[retention]\nkeep_snapshots = 5\ncheckpoint_every = 1\n[duckdb]\nthreads = " + clitest.TestThreads + "\nread_replica = true\n"
	clitest.WriteFile(t, filepath.Join(dir, "jobs", "vc.toml"), `name = "vc"
pipeline = "versioned_changes"
transform_version = 1
schema_version = 1
database = "../db/chain.duckdb"
[input]
path = "../changes/*.jsonl"
format = "jsonl"
mode = "files"
[privacy]
subject = ["entity_id"]
`+settings)
	clitest.WriteFile(t, filepath.Join(dir, "jobs", "src.toml"), `name = "src"
pipeline = "select"
transform_version = 1
database = "../db/chain.duckdb"
[input]
upstream = ["vc"]
[transform]
sql = "models/src"
[target]
key = ["entity_id"]
`+settings)
	clitest.WriteFile(t, filepath.Join(dir, "jobs", "models", "src", "v1.sql"), "SELECT entity_id, source_version, value FROM {{upstream:vc}} WHERE status = 'active'\n")
	clitest.WriteFile(t, filepath.Join(dir, "jobs", "agg.toml"), `name = "agg"
pipeline = "select"
transform_version = 1
database = "../db/chain.duckdb"
[input]
upstream = ["vc"]
[transform]
sql = "models/agg"
[target]
key = ["status"]
`+settings)
	clitest.WriteFile(t, filepath.Join(dir, "jobs", "models", "agg", "v1.sql"),
		"SELECT status, count(*) AS entities, sum(source_version) AS versions, string_agg(value, '|') AS payloads FROM {{upstream:vc}} GROUP BY status\n")
	clitest.WriteFile(t, filepath.Join(dir, "jobs", "down.toml"), `name = "down"
pipeline = "merge_by_key"
transform_version = 2
schema_version = 1
database = "../db/chain.duckdb"
[input]
upstream = ["src"]
[input.columns]
entity_id = "VARCHAR"
source_version = "BIGINT"
value = "VARCHAR"
[target]
key = ["entity_id"]
order_by = "source_version"
`+settings)
	clitest.WriteFile(t, filepath.Join(dir, "changes", "b1.jsonl"),
		`{"change_id":"1","entity_id":"alice","source_version":1,"operation":"upsert","value":"SECRETPAYLOADX1"}
{"change_id":"2","entity_id":"bob","source_version":1,"operation":"upsert","value":"bob1"}
{"change_id":"3","entity_id":"carol","source_version":1,"operation":"upsert","value":"carol1"}
`)
	clitest.WriteFile(t, filepath.Join(dir, "changes", "b2.jsonl"),
		`{"change_id":"4","entity_id":"alice","source_version":2,"operation":"upsert","value":"SECRETPAYLOADX2"}
{"change_id":"5","entity_id":"bob","source_version":2,"operation":"upsert","value":"bob2"}
`)
}

// ranChain is eraseChainProject after one run of the project (b1 and b2),
// built once and copied into a folder of the test's own: it returns the
// folder, its jobs folder and its database.
func ranChain(t *testing.T) (dir, jobs, db string) {
	t.Helper()
	dir = ranProject(t, &ranChainFixture, "erase-chain", eraseChainProject)
	return dir, filepath.Join(dir, "jobs"), filepath.Join(dir, "db", "chain.duckdb")
}

// ranProject is the project write puts in a folder, after one run of its
// jobs folder, built once (once, in fixture folder name) and copied into
// a folder of the test's own, which it returns.
func ranProject(t *testing.T, once *clitest.Once[string], name string, write func(*testing.T, string)) string {
	t.Helper()
	src := once.Get(t, func(t *testing.T) string {
		dir := clitest.FixtureDir(t, name)
		write(t, dir)
		code, out, errOut := clitest.InProcess(t, "run", filepath.Join(dir, "jobs"))
		require.Equal(t, 0, code, out+errOut)
		return dir
	})
	dir := t.TempDir()
	clitest.CopyDir(t, src, dir)
	return dir
}

var ranChainFixture clitest.Once[string]

// TestEraseThroughChain erases one subject from the upstream of a chain
// (issue 26): a select model and an aggregate model over it are
// recomputed for every kept snapshot, the merge_by_key job fed by the
// model's changes loses the subject's rows, all in one command. Then the
// payload is in no file under the database's folder once compacted (the
// replica and retained inputs even before); every kept snapshot of every
// job exports without it, and the first and last of each (every one with
// IDEM_LONG=1) rerun reproduced; the aggregate equals the
// aggregate without the subject; the next project run changes nothing;
// a dry run commits nothing; erasing again says already erased.
func TestEraseThroughChain(t *testing.T) {
	t.Parallel()
	dir, jobs, db := ranChain(t)
	vc := filepath.Join(jobs, "vc.toml")
	require.Equal(t, []string{"active|3|5|SECRETPAYLOADX2|bob2|carol1"}, clitest.QueryStrs(t, db, `SELECT status || '|' || entities || '|' || versions || '|' || payloads FROM agg`))
	// A third batch, so the chain has several snapshots after the erased
	// subject's last change.
	clitest.WriteFile(t, filepath.Join(dir, "changes", "b3.jsonl"), `{"change_id":"6","entity_id":"carol","source_version":2,"operation":"upsert","value":"carol2"}`+"\n")
	code, out, errOut := clitest.InProcess(t, "run", jobs)
	require.Equal(t, 0, code, out+errOut)

	// A dry run lists what would change and commits nothing.
	before := clitest.CaptureState(t, db)
	code, out, errOut = clitest.InProcess(t, "erase", vc, "--key", "alice", "--dry-run")
	require.Equal(t, 0, code, out+errOut)
	require.Contains(t, out, "dry run: nothing was committed")
	require.Contains(t, out, "vc: erased key \"alice\"")
	require.Contains(t, out, "src: recomputed without the subject")
	require.Contains(t, out, "agg: recomputed without the subject")
	require.Contains(t, out, "down: erased subject \"alice\"")
	require.Equal(t, before, clitest.CaptureState(t, db), "a dry run commits nothing")
	// The same for the project folder: every job that declares a subject.
	code, out, errOut = clitest.InProcess(t, "erase", jobs, "--subject", "alice", "--dry-run", "--json")
	require.Equal(t, 0, code, out+errOut)
	var plan struct {
		Erased     []struct{ Job string }
		Recomputed []struct{ Job string }
		DryRun     bool `json:"dry_run"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &plan), out)
	require.True(t, plan.DryRun)
	require.Len(t, plan.Erased, 2, out)
	require.Equal(t, "vc", plan.Erased[0].Job)
	require.Equal(t, "down", plan.Erased[1].Job)
	require.Len(t, plan.Recomputed, 2, out)
	require.Equal(t, before, clitest.CaptureState(t, db), "a dry run commits nothing")

	code, out, errOut = clitest.InProcess(t, "erase", vc, "--key", "alice", "--json")
	require.Equal(t, 0, code, out+errOut)
	require.Contains(t, out, `"job":"vc","key":"alice"`)
	require.Contains(t, out, `"downstream":[{"job":"down"`)
	require.Contains(t, out, `"recomputed":[{"job":"agg"`)
	require.NotContains(t, out, "SECRETPAYLOAD")

	// The aggregate is the aggregate without alice, and so is every kept
	// snapshot of it.
	require.Equal(t, []string{"active|2|4|bob2|carol2"}, clitest.QueryStrs(t, db, `SELECT status || '|' || entities || '|' || versions || '|' || payloads FROM agg`))
	for _, j := range []string{"vc", "src", "agg", "down"} {
		file := filepath.Join(jobs, j+".toml")
		snaps := clitest.QueryStrs(t, db, `SELECT snapshot FROM idem.snapshots WHERE job = ? ORDER BY snapshot`, j)
		require.GreaterOrEqual(t, len(snaps), 3, j)
		for i, s := range snaps {
			exp := filepath.Join(t.TempDir(), "out.csv")
			code, out, errOut := clitest.InProcess(t, "export", file, "--snapshot", s, "--out", exp)
			require.Equal(t, 0, code, "%s snapshot %s: %s", j, s, out+errOut)
			data, err := os.ReadFile(exp)
			require.NoError(t, err)
			require.NotContains(t, string(data), "SECRETPAYLOAD", "%s snapshot %s", j, s)
			require.NotContains(t, string(data), "alice", "%s snapshot %s", j, s)
			if i > 0 && i < len(snaps)-1 && !clitest.LongTests() {
				continue // the first and the last rerun; every one with IDEM_LONG=1
			}
			code, out, errOut = clitest.InProcess(t, "rerun", file, "--snapshot", s, "--json")
			require.Equal(t, 0, code, "%s snapshot %s: %s", j, s, out+errOut)
			require.Contains(t, out, `"reproduced":true`, "%s snapshot %s", j, s)
		}
	}

	// show names the sha256 each erasure replaced, and rerun why the rows
	// changed.
	code, out, errOut = clitest.InProcess(t, "show", vc, "--snapshot", "1")
	require.Equal(t, 0, code, out+errOut)
	require.Contains(t, out, "  erased    by snapshot 4: whole target was 3 rows, sha256 ")
	code, out, errOut = clitest.InProcess(t, "show", filepath.Join(jobs, "agg.toml"), "--snapshot", "1", "--json")
	require.Equal(t, 0, code, out+errOut)
	require.Contains(t, out, `"erasures":[{"snapshot":3,"replaced":[{"partition":null,"whole_target":true,"rows":1,`)
	code, out, errOut = clitest.InProcess(t, "rerun", filepath.Join(jobs, "src.toml"), "--snapshot", "1")
	require.Equal(t, 0, code, out+errOut)
	require.Contains(t, out, "  erased   rows rewritten by erasure snapshot 3")

	// The next run of the project finds nothing new, and a replay of the
	// pre-erasure batches changes nothing.
	state := clitest.CaptureState(t, db)
	code, out, errOut = clitest.InProcess(t, "run", jobs)
	require.Equal(t, 0, code, out+errOut)
	require.NotContains(t, out, "loaded")
	require.NotContains(t, out, "applied")
	require.Equal(t, state, clitest.CaptureState(t, db), "the run after the erasure changes nothing")
	// Erasing again: already erased, nothing committed.
	code, out, errOut = clitest.InProcess(t, "erase", vc, "--key", "alice")
	require.Equal(t, 0, code, out+errOut)
	require.Contains(t, out, "vc: key \"alice\" was already erased")

	// A replay of the pre-erasure batches, under new names: alice's
	// changes are dropped as erased, and nothing of hers comes back.
	for _, b := range []string{"b1", "b2"} {
		data, err := os.ReadFile(filepath.Join(dir, "changes", b+".jsonl"))
		require.NoError(t, err)
		clitest.WriteFile(t, filepath.Join(dir, "changes", "replay-"+b+".jsonl"), string(data))
	}
	code, out, errOut = clitest.InProcess(t, "run", jobs)
	require.Equal(t, 0, code, out+errOut)
	require.Contains(t, out, "erased 1")
	// The replayed changes' outcomes name nothing: neither key nor payload.
	require.Equal(t, []string{"2"}, clitest.QueryStrs(t, db, `SELECT count(*) FROM vc_outcomes WHERE outcome = 'erased' AND coalesce(change_id, entity_id, value) IS NULL`))
	require.Equal(t, []string{"0"}, clitest.QueryStrs(t, db, `SELECT count(*) FROM vc_outcomes WHERE entity_id = 'alice'`))
	for _, q := range []string{`SELECT count(*) FROM vc WHERE entity_id = 'alice'`, `SELECT count(*) FROM src WHERE entity_id = 'alice'`,
		`SELECT count(*) FROM down WHERE entity_id = 'alice'`, `SELECT count(*) FROM agg WHERE payloads LIKE '%SECRET%'`} {
		require.Equal(t, []string{"0"}, clitest.QueryStrs(t, db, q), q)
	}

	// No file under the database's folder holds the payload: the replica
	// and retained files at once, the database file once compacted.
	clitest.RequireNoPayload(t, filepath.Join(dir, "db"), "SECRETPAYLOAD", db)
	code, out, errOut = clitest.InProcess(t, "compact", "--db", db)
	require.Equal(t, 0, code, out+errOut)
	clitest.RequireNoPayload(t, filepath.Join(dir, "db"), "SECRETPAYLOAD", "")
}

// TestEraseSubjectRefused: what erase refuses, each exit 2 with every idem
// table as it was: --subject on a job that names no subject columns, --key
// and --subject together, --key on a project folder, a reader of the
// erased job that keeps its rows without any of the subject's columns,
// and a reader the database knows whose job file is not beside the job.
func TestEraseSubjectRefused(t *testing.T) {
	t.Parallel()
	dir, jobs, db := ranChain(t)
	// A copy of vc's job file in another folder: its readers have no job
	// file there.
	other := filepath.Join(dir, "other", "vc.toml")
	data, err := os.ReadFile(filepath.Join(jobs, "vc.toml"))
	require.NoError(t, err)
	clitest.WriteFile(t, other, string(data))
	// A reader of src that keeps value only, with no subject columns.
	blind := filepath.Join(dir, "blind")
	for _, f := range []string{"vc.toml", "src.toml", "agg.toml", "down.toml", "models/src/v1.sql", "models/agg/v1.sql"} {
		data, err := os.ReadFile(filepath.Join(jobs, f))
		require.NoError(t, err)
		clitest.WriteFile(t, filepath.Join(blind, f), string(data))
	}
	clitest.WriteFile(t, filepath.Join(blind, "renamed.toml"), `name = "renamed"
pipeline = "select"
transform_version = 1
database = "../db/chain.duckdb"
[input]
upstream = ["vc"]
[transform]
sql = "models/renamed"
[target]
key = ["who"]
`+clitest.DuckdbSection)
	clitest.WriteFile(t, filepath.Join(blind, "models", "renamed", "v1.sql"), "SELECT entity_id AS who, source_version, value FROM {{upstream:vc}}\n")
	clitest.WriteFile(t, filepath.Join(blind, "values.toml"), `name = "values"
pipeline = "merge_by_key"
transform_version = 2
schema_version = 1
database = "../db/chain.duckdb"
[input]
upstream = ["renamed"]
[input.columns]
who = "VARCHAR"
value = "VARCHAR"
source_version = "BIGINT"
[target]
key = ["who"]
order_by = "source_version"
`+clitest.DuckdbSection)
	code, out, errOut := clitest.InProcess(t, "run", filepath.Join(blind, "renamed.toml"), filepath.Join(blind, "values.toml"))
	require.Equal(t, 0, code, out+errOut)

	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"no subject columns", []string{filepath.Join(jobs, "src.toml"), "--subject", "alice"}, "src has no [privacy] subject"},
		{"key and subject", []string{filepath.Join(jobs, "vc.toml"), "--key", "alice", "--subject", "alice"}, "--key K or --subject VALUE, not both"},
		{"key on a project", []string{jobs, "--key", "alice"}, "takes --subject VALUE"},
		{"reader without the columns", []string{filepath.Join(blind, "vc.toml"), "--subject", "alice"}, "job values reads an erased job and keeps its rows in values, but has none of the columns entity_id"},
		{"reader not beside", []string{other, "--key", "alice"}, "no job file for it was given"},
	} {
		t.Run(c.name, func(t *testing.T) {
			before := clitest.CaptureState(t, db)
			code, out, errOut := clitest.InProcess(t, append([]string{"erase"}, c.args...)...)
			require.Equal(t, 2, code, out+errOut)
			require.Contains(t, errOut, c.want)
			require.Equal(t, before, clitest.CaptureState(t, db), "nothing committed")
		})
	}
}

// TestEraseSubjectOfFileJob erases by a subject column that is not the key
// from a merge_by_key job fed by files (no position column): every row of
// the subject goes from the target, its history, its outcomes and the
// retained files, every snapshot reruns, and the next run loads nothing.
func TestEraseSubjectOfFileJob(t *testing.T) {
	t.Parallel()
	job, db := tripsSubjectJob(t)
	code, out, errOut := clitest.InProcess(t, "run", job)
	require.Equal(t, 0, code, out+errOut)
	code, out, errOut = clitest.InProcess(t, "erase", job, "--subject", "r100")
	require.Equal(t, 0, code, out+errOut)
	require.Contains(t, out, "trips: erased subject \"r100\"\n  snapshot  3\n  subject   in rider_id; 2 key(s)\n")
	require.Equal(t, []string{"2|r101", "4|r102"}, clitest.QueryStrs(t, db, `SELECT trip_id || '|' || rider_id FROM trips ORDER BY ALL`))
	for _, q := range []string{`SELECT count(*) FROM idem.trips__history WHERE rider_id = 'r100'`, `SELECT count(*) FROM trips_outcomes WHERE rider_id = 'r100'`} {
		require.Equal(t, []string{"0"}, clitest.QueryStrs(t, db, q), q)
	}
	clitest.RequireNoPayload(t, db+".inputs", "r100", "")
	for s := 1; s <= 3; s++ {
		code, out, errOut = clitest.InProcess(t, "rerun", job, "--snapshot", strconv.Itoa(s), "--json")
		require.Equal(t, 0, code, out+errOut)
		require.Contains(t, out, `"reproduced":true`, "snapshot %d", s)
	}
	code, out, errOut = clitest.InProcess(t, "run", job)
	require.Equal(t, 0, code, out+errOut)
	require.Contains(t, out, "trips: skipped")
}

// TestRestoreBeforeErasure: a backup taken before an erasure, restored as
// the README says (the database file and its inputs copied back), is
// refused by every command (exit 3, naming the erasures its journal
// records) until erase --replay-journal applies them again through the
// chain; the journal holds no erased value.
func TestRestoreBeforeErasure(t *testing.T) {
	t.Parallel()
	dir, jobs, db := ranChain(t)
	bk := filepath.Join(dir, "backup")
	code, out, errOut := clitest.InProcess(t, "backup", "--db", db, "--out", bk)
	require.Equal(t, 0, code, out+errOut)
	code, out, errOut = clitest.InProcess(t, "erase", filepath.Join(jobs, "vc.toml"), "--key", "alice")
	require.Equal(t, 0, code, out+errOut)
	erased := map[string][]string{}
	queries := []string{`SELECT entity_id || value FROM vc ORDER BY ALL`, `SELECT entity_id || value FROM src ORDER BY ALL`,
		`SELECT entity_id || value FROM down ORDER BY ALL`, `SELECT payloads FROM agg ORDER BY ALL`, `SELECT job || key || coalesce(subject_columns, '') FROM idem.erasures ORDER BY ALL`}
	for _, q := range queries {
		erased[q] = clitest.QueryStrs(t, db, q)
	}
	journal, err := os.ReadFile(db + ".erasures")
	require.NoError(t, err)
	require.Equal(t, 3, bytes.Count(journal, []byte("\n")), "vc: the key; down: the subject and its key: %s", journal)
	require.NotContains(t, string(journal), "alice")

	// The restore: the backup's database file and inputs copied back.
	require.NoError(t, os.Remove(db))
	require.NoError(t, os.RemoveAll(db+".inputs"))
	clitest.CopyDir(t, bk, filepath.Join(dir, "db"))
	require.NoError(t, os.Remove(filepath.Join(dir, "db", "manifest.json")))
	for _, args := range [][]string{{"query", "--db", db, "SELECT 1"}, {"run", jobs}, {"export", filepath.Join(jobs, "vc.toml"), "--out", filepath.Join(dir, "x.csv")}} {
		code, out, errOut = clitest.InProcess(t, args...)
		require.Equal(t, 3, code, "%v: %s", args, out+errOut)
		require.Contains(t, errOut, "lacks 3 erasure(s) its erasure journal")
		require.Contains(t, errOut, "job vc erased at")
		require.Contains(t, errOut, "idem erase --replay-journal")
	}
	code, out, errOut = clitest.InProcess(t, "erase", jobs, "--replay-journal")
	require.Equal(t, 0, code, out+errOut)
	require.Contains(t, out, "journal: erasure of job vc")
	require.Contains(t, out, "src: recomputed without the subject")
	for _, q := range queries {
		require.Equal(t, erased[q], clitest.QueryStrs(t, db, q), q)
	}
	code, out, errOut = clitest.InProcess(t, "erase", jobs, "--replay-journal")
	require.Equal(t, 0, code, out+errOut)
	require.Contains(t, out, "holds every erasure its journal records")
	code, out, errOut = clitest.InProcess(t, "run", jobs)
	require.Equal(t, 0, code, out+errOut)
}

// TestEraseCompositeKey: --key COL=VALUE for each column of a composite
// key erases exactly that key's rows (not every row of one of its values)
// from the job's tables and retained inputs, and from a model that reads
// it; every snapshot still reruns; a key given short of a column, with an
// unknown column or twice is refused (exit 2) with nothing changed; the
// journal holds the key's hash and --replay-journal finds it again.
func TestEraseCompositeKey(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	settings := "[retention]\nkeep_snapshots = 5\ncheckpoint_every = 1\n" + clitest.DuckdbSection
	clitest.WriteFile(t, filepath.Join(dir, "stock.toml"), `name = "stock"
pipeline = "merge_by_key"
transform_version = 1
schema_version = 1
database = "stock.duckdb"
[input]
path = "landing/*.csv"
format = "csv"
mode = "files"
[input.columns]
region = "VARCHAR"
sku = "BIGINT"
note = "VARCHAR"
updated_at = "BIGINT"
[target]
key = ["region", "sku"]
order_by = "updated_at"
`+settings)
	clitest.WriteFile(t, filepath.Join(dir, "by_region.toml"), `name = "by_region"
pipeline = "select"
transform_version = 1
database = "stock.duckdb"
[input]
upstream = ["stock"]
[transform]
sql = "models/by_region"
[target]
key = ["region"]
`+settings)
	clitest.WriteFile(t, filepath.Join(dir, "models", "by_region", "v1.sql"),
		"SELECT region, count(*) AS skus, string_agg(note, '|' ORDER BY sku) AS notes FROM {{upstream:stock}} GROUP BY region\n")
	clitest.WriteFile(t, filepath.Join(dir, "landing", "1.csv"), "region,sku,note,updated_at\neu,7,SECRETNOTE1,1\neu,8,eu8,1\nus,7,us7,1\n")
	clitest.WriteFile(t, filepath.Join(dir, "landing", "2.csv"), "region,sku,note,updated_at\neu,7,SECRETNOTE2,2\nus,8,us8,1\n")
	stock, model := filepath.Join(dir, "stock.toml"), filepath.Join(dir, "by_region.toml")
	db := filepath.Join(dir, "stock.duckdb")
	code, out, errOut := clitest.InProcess(t, "run", dir)
	require.Equal(t, 0, code, out+errOut)
	bk := filepath.Join(t.TempDir(), "backup")
	code, out, errOut = clitest.InProcess(t, "backup", "--db", db, "--out", bk)
	require.Equal(t, 0, code, out+errOut)

	before := clitest.CaptureState(t, db)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--key", "eu"}, `erase --key "eu": job stock has the composite key (region, sku): give each column as --key COLUMN=VALUE`},
		{[]string{"--key", "region=eu"}, "erase --key: job stock's key is (region, sku); --key sku=VALUE is missing"},
		{[]string{"--key", "region=eu", "--key", "sku=7", "--key", "region=us"}, "erase --key: column region of job stock's key is given twice"},
		{[]string{"--key", "region=eu", "--key", "size=7"}, `erase --key "size=7": job stock has the composite key (region, sku)`},
		{[]string{"--key", "region=eu", "--key", "sku=9"}, "erase [\"eu\",\"9\"] from job stock: the key is in no row, snapshot or retained input; nothing committed"},
	} {
		code, out, errOut := clitest.InProcess(t, append([]string{"erase", stock}, tc.args...)...)
		require.NotEqual(t, 0, code, "%v: %s", tc.args, out+errOut)
		require.Contains(t, errOut, tc.want, tc.args)
		require.Equal(t, before, clitest.CaptureState(t, db), "%v changed the database", tc.args)
	}

	code, out, errOut = clitest.InProcess(t, "erase", stock, "--key", "sku=7", "--key", "region=eu")
	require.Equal(t, 0, code, out+errOut)
	require.Contains(t, out, "stock: erased key region=\"eu\" sku=\"7\"\n  snapshot  3\n")
	require.Contains(t, out, "by_region: recomputed")
	require.Equal(t, []string{"eu|8|eu8", "us|7|us7", "us|8|us8"}, clitest.QueryStrs(t, db, `SELECT region || '|' || sku || '|' || note FROM stock ORDER BY ALL`))
	require.Equal(t, []string{"eu|1|eu8", "us|2|us7|us8"}, clitest.QueryStrs(t, db, `SELECT region || '|' || skus || '|' || notes FROM by_region ORDER BY ALL`))
	for _, q := range []string{`SELECT count(*) FROM idem.stock__history WHERE region = 'eu' AND sku = 7`, `SELECT count(*) FROM stock_outcomes WHERE region = 'eu' AND sku = 7`,
		`SELECT count(*) FROM idem.by_region__history WHERE notes LIKE '%SECRET%'`} {
		require.Equal(t, []string{"0"}, clitest.QueryStrs(t, db, q), q)
	}
	require.Equal(t, []string{`stock true`}, clitest.QueryStrs(t, db, `SELECT job || ' ' || (key = sha256(salt || '["eu","7"]')) FROM idem.erasures WHERE subject_columns IS NULL`), "the key's JSON array, hashed")
	clitest.RequireNoPayload(t, db+".inputs", "SECRETNOTE", "")
	for f, last := range map[string]int{stock: 3, model: 2} {
		for s := 1; s <= last; s++ {
			code, out, errOut = clitest.InProcess(t, "rerun", f, "--snapshot", strconv.Itoa(s), "--json")
			require.Equal(t, 0, code, out+errOut)
			require.Contains(t, out, `"reproduced":true`, "%s snapshot %d", f, s)
		}
	}
	code, out, errOut = clitest.InProcess(t, "erase", stock, "--key", "region=eu", "--key", "sku=7", "--json")
	require.Equal(t, 0, code, out+errOut)
	require.Contains(t, out, `"key_columns":["region","sku"]`)
	require.Contains(t, out, `"already_erased":true`)
	journal, err := os.ReadFile(db + ".erasures")
	require.NoError(t, err)
	require.NotContains(t, string(journal), "eu")

	// The backup from before the erasure restored, then the journal
	// replayed: the same rows again.
	erased := map[string][]string{}
	queries := []string{`SELECT region || '|' || sku || '|' || note FROM stock ORDER BY ALL`, `SELECT region || '|' || notes FROM by_region ORDER BY ALL`,
		`SELECT job || key || coalesce(subject_columns, '') FROM idem.erasures ORDER BY ALL`}
	for _, q := range queries {
		erased[q] = clitest.QueryStrs(t, db, q)
	}
	require.NoError(t, os.Remove(db))
	require.NoError(t, os.RemoveAll(db+".inputs"))
	clitest.CopyDir(t, bk, dir)
	require.NoError(t, os.Remove(filepath.Join(dir, "manifest.json")))
	code, out, errOut = clitest.InProcess(t, "query", "--db", db, "SELECT 1")
	require.Equal(t, 3, code, out+errOut)
	code, out, errOut = clitest.InProcess(t, "erase", dir, "--replay-journal")
	require.Equal(t, 0, code, out+errOut)
	for _, q := range queries {
		require.Equal(t, erased[q], clitest.QueryStrs(t, db, q), q)
	}
}

// tripsSubjectJob is a merge_by_key job fed by files, without
// partition_by, whose rows name a subject (rider_id), with two files in
// its landing folder: r100's rows in both, r101's in the first, r102's in
// the second. Nothing has run yet.
func tripsSubjectJob(t *testing.T) (job, db string) {
	t.Helper()
	dir := t.TempDir()
	clitest.WriteFile(t, filepath.Join(dir, "trips.toml"), `name = "trips"
pipeline = "merge_by_key"
transform_version = 1
schema_version = 1
database = "trips.duckdb"
[input]
path = "landing/*.jsonl"
format = "jsonl"
mode = "files"
[input.columns]
trip_id = "BIGINT"
rider_id = "VARCHAR"
fare = "DOUBLE"
updated_at = "BIGINT"
[target]
key = ["trip_id"]
order_by = "updated_at"
[privacy]
subject = ["rider_id"]
`+clitest.DuckdbSection)
	clitest.WriteFile(t, filepath.Join(dir, "landing", "1.jsonl"), `{"trip_id": 1, "rider_id": "r100", "fare": 12.5, "updated_at": 1}
{"trip_id": 2, "rider_id": "r101", "fare": 8.0, "updated_at": 1}
`)
	clitest.WriteFile(t, filepath.Join(dir, "landing", "2.jsonl"), `{"trip_id": 1, "rider_id": "r100", "fare": 13.0, "updated_at": 2}
{"trip_id": 3, "rider_id": "r100", "fare": 19.0, "updated_at": 1}
{"trip_id": 4, "rider_id": "r102", "fare": 9.5, "updated_at": 1}
`)
	return filepath.Join(dir, "trips.toml"), filepath.Join(dir, "trips.duckdb")
}
