package datatest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/idem-dev/idem/cmd/idem/cli/internal/clitest"
	"github.com/stretchr/testify/require"
)

// Erasure without exceptions (issue 43): each test is an attack that held
// on d4c1a70's code.

// copyLanding copies the landing file name of a job folder under a new
// name, as an old file fed again.
func copyLanding(t *testing.T, dir, name, as string) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, "landing", name))
	require.NoError(t, err)
	clitest.WriteFile(t, filepath.Join(dir, "landing", as), string(data))
}

// TestEraseReplayMergeByKey: a merge_by_key job fed by files has no
// position column; an old landing file copied under a new name after an
// erasure, by subject or by key, brings nothing of the erased rows back:
// they get outcome erased with no value kept (not even the key), the
// retained copy of the new file is rewritten without them, and every
// snapshot reruns.
func TestEraseReplayMergeByKey(t *testing.T) {
	t.Parallel()
	jobFile, db := tripsSubjectJob(t)
	dir := filepath.Dir(jobFile)
	code, out, errOut := clitest.InProcess(t, "run", jobFile)
	require.Equal(t, 0, code, out+errOut)
	code, out, errOut = clitest.InProcess(t, "erase", jobFile, "--subject", "r100")
	require.Equal(t, 0, code, out+errOut)
	code, out, errOut = clitest.InProcess(t, "erase", jobFile, "--key", "4")
	require.Equal(t, 0, code, out+errOut)

	copyLanding(t, dir, "1.jsonl", "1-again.jsonl")
	copyLanding(t, dir, "2.jsonl", "2-again.jsonl")
	code, out, errOut = clitest.InProcess(t, "run", jobFile)
	require.Equal(t, 0, code, out+errOut)
	require.Contains(t, out, "outcomes  duplicate 1, erased 1\n")
	require.Contains(t, out, "outcomes  erased 3\n")
	require.Equal(t, []string{"2|r101"}, clitest.QueryStrs(t, db, `SELECT trip_id || '|' || rider_id FROM trips ORDER BY ALL`))
	require.Equal(t, []string{"0"}, clitest.QueryStrs(t, db, `SELECT count(*) FROM idem.trips__history WHERE rider_id = 'r100' OR trip_id IN (1, 3, 4)`))
	// The erased rows' outcomes hold no value at all.
	require.Equal(t, []string{"4"}, clitest.QueryStrs(t, db, `SELECT count(*) FROM trips_outcomes WHERE outcome = 'erased' AND coalesce(trip_id, rider_id, fare, updated_at) IS NULL`))
	require.Equal(t, []string{"0"}, clitest.QueryStrs(t, db, `SELECT count(*) FROM trips_outcomes WHERE rider_id IN ('r100', 'r102') OR trip_id IN ('1', '3', '4')`))
	clitest.RequireNoPayload(t, db+".inputs", "r100", "")
	clitest.RequireNoPayload(t, db+".inputs", "r102", "")
	snaps := clitest.QueryStrs(t, db, `SELECT snapshot FROM idem.snapshots WHERE job = 'trips' ORDER BY snapshot`)
	require.Len(t, snaps, 6)
	for _, s := range snaps {
		code, out, errOut = clitest.InProcess(t, "rerun", jobFile, "--snapshot", s, "--json")
		require.Equal(t, 0, code, "snapshot %s: %s", s, out+errOut)
		require.Contains(t, out, `"reproduced":true`, "snapshot %s", s)
	}
	// The key erased is refused for good: a job without a position column
	// cannot tell an old row of it from a new one.
	clitest.WriteFile(t, filepath.Join(dir, "landing", "3.jsonl"), `{"trip_id": 4, "rider_id": "r103", "fare": 1.0, "updated_at": 9}`+"\n")
	code, out, errOut = clitest.InProcess(t, "run", jobFile)
	require.Equal(t, 0, code, out+errOut)
	require.Contains(t, out, "outcomes  erased 1\n")
}

// TestEraseReplaySample: the guard of a refresh pipeline without a
// position column (sample): after erase --key, a new input file that
// holds the erased row again loads without it (outcome erased, no value
// kept, its retained copy rewritten) and every snapshot reruns.
func TestEraseReplaySample(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	jobFile, db := filepath.Join(dir, "occ.toml"), filepath.Join(dir, "occ.duckdb")
	clitest.WriteFile(t, jobFile, `name = "occ"
pipeline = "sample"
transform_version = 2
schema_version = 2
database = "occ.duckdb"
[input]
path = "occ.csv"
format = "csv"
`+clitest.DuckdbSection)
	rows := "id,species_id,year,license\n1,10,2000,CC0 1.0\n2,10,1999,CC0 1.0\n"
	clitest.WriteFile(t, filepath.Join(dir, "occ.csv"), rows)
	code, out, errOut := clitest.InProcess(t, "run", jobFile)
	require.Equal(t, 0, code, out+errOut)
	code, out, errOut = clitest.InProcess(t, "erase", jobFile, "--key", "2")
	require.Equal(t, 0, code, out+errOut)
	clitest.WriteFile(t, filepath.Join(dir, "occ2.csv"), rows+"3,11,2002,CC BY 4.0\n")
	code, out, errOut = clitest.InProcess(t, "run", jobFile, "--input", filepath.Join(dir, "occ2.csv"))
	require.Equal(t, 0, code, out+errOut)
	require.Contains(t, out, "outcomes  accepted 2, erased 1\n")
	require.Equal(t, []string{"1", "3"}, clitest.QueryStrs(t, db, `SELECT id FROM occ ORDER BY id`))
	require.Equal(t, []string{"accepted", "accepted", "erased"}, clitest.QueryStrs(t, db, `SELECT outcome FROM occ_outcomes WHERE id IS NOT NULL OR coalesce(species_id, year, license) IS NULL ORDER BY outcome`))
	clitest.RequireNoPayload(t, db+".inputs", "1999", "")
	for _, s := range []string{"1", "2", "3"} {
		code, out, errOut = clitest.InProcess(t, "rerun", jobFile, "--snapshot", s, "--json")
		require.Equal(t, 0, code, "snapshot %s: %s", s, out+errOut)
		require.Contains(t, out, `"reproduced":true`, "snapshot %s", s)
	}
}

// fiveJobProject writes the chain of issue 43 into dir: people
// (versioned_changes, subject entity_id) and accounts (merge_by_key fed by
// files, subject customer) → profile (a model that itself declares the
// subject: per region its last customer, the accounts' notes and their
// people's values, string_agg) → totals (an aggregate model over
// profile), and plain (merge_by_key fed by files, subject owner, holding
// none of alice). The database is dir/db/five.duckdb; alice's payload is
// SECRETPAYLOAD*, her identifier alice.
func fiveJobProject(t *testing.T, dir string) {
	settings := "[retention]\nkeep_snapshots = 5\n" + clitest.DuckdbSection
	w := func(rel, text string) { clitest.WriteFile(t, filepath.Join(dir, rel), text) }
	w("jobs/people.toml", `name = "people"
pipeline = "versioned_changes"
transform_version = 1
schema_version = 1
database = "../db/five.duckdb"
[input]
path = "../changes/*.jsonl"
format = "jsonl"
[privacy]
subject = ["entity_id"]
`+settings)
	w("jobs/accounts.toml", `name = "accounts"
pipeline = "merge_by_key"
transform_version = 1
schema_version = 1
database = "../db/five.duckdb"
[input]
path = "../landing/*.jsonl"
format = "jsonl"
mode = "files"
[input.columns]
account_id = "BIGINT"
customer = "VARCHAR"
region = "VARCHAR"
note = "VARCHAR"
updated_at = "BIGINT"
[target]
key = ["account_id"]
order_by = "updated_at"
[privacy]
subject = ["customer"]
`+settings)
	w("jobs/profile.toml", `name = "profile"
pipeline = "select"
transform_version = 1
database = "../db/five.duckdb"
[input]
upstream = ["accounts", "people"]
[transform]
sql = "models/profile"
[target]
key = ["region"]
[privacy]
subject = ["customer"]
`+settings)
	w("jobs/models/profile/v1.sql", `SELECT a.region, max(a.customer) AS customer, count(*) AS accounts,
    string_agg(a.note || '/' || coalesce(p.value, '-'), '|' ORDER BY a.account_id) AS notes
FROM {{upstream:accounts}} AS a LEFT JOIN {{upstream:people}} AS p ON p.entity_id = a.customer
GROUP BY a.region
`)
	w("jobs/totals.toml", `name = "totals"
pipeline = "select"
transform_version = 1
database = "../db/five.duckdb"
[input]
upstream = ["profile"]
[transform]
sql = "models/totals"
[target]
key = ["scope"]
`+settings)
	w("jobs/models/totals/v1.sql", "SELECT 'all' AS scope, count(*) AS regions, sum(accounts) AS accounts, string_agg(notes, ';' ORDER BY region) AS notes FROM {{upstream:profile}}\n")
	w("jobs/plain.toml", `name = "plain"
pipeline = "merge_by_key"
transform_version = 1
schema_version = 1
database = "../db/five.duckdb"
[input]
path = "../rates/*.jsonl"
format = "jsonl"
mode = "files"
[input.columns]
region = "VARCHAR"
owner = "VARCHAR"
rate = "BIGINT"
[target]
key = ["region"]
[privacy]
subject = ["owner"]
`+settings)
	w("changes/b1.jsonl", `{"change_id":"1","entity_id":"alice","source_version":1,"operation":"upsert","value":"SECRETPAYLOADP1"}
{"change_id":"2","entity_id":"bob","source_version":1,"operation":"upsert","value":"bob1"}
`)
	w("changes/b2.jsonl", `{"change_id":"3","entity_id":"alice","source_version":2,"operation":"upsert","value":"SECRETPAYLOADP2"}
{"change_id":"4","entity_id":"carol","source_version":1,"operation":"upsert","value":"carol1"}
`)
	// eu: alice and bob (the last customer is bob); us: alice alone.
	w("landing/1.jsonl", `{"account_id": 1, "customer": "alice", "region": "eu", "note": "SECRETPAYLOADA1", "updated_at": 1}
{"account_id": 2, "customer": "bob", "region": "eu", "note": "bobnote", "updated_at": 1}
`)
	w("landing/2.jsonl", `{"account_id": 3, "customer": "alice", "region": "us", "note": "SECRETPAYLOADA3", "updated_at": 1}
{"account_id": 4, "customer": "carol", "region": "ap", "note": "carolnote", "updated_at": 1}
`)
	w("rates/1.jsonl", `{"region": "eu", "owner": "dave", "rate": 3}
`)
}

// ranFive is fiveJobProject after one run of the project, built once and
// copied into a folder of the test's own: the folder, its jobs folder and
// its database.
func ranFive(t *testing.T) (dir, jobs, db string) {
	t.Helper()
	dir = ranProject(t, &ranFiveFixture, "erase-five", fiveJobProject)
	return dir, filepath.Join(dir, "jobs"), filepath.Join(dir, "db", "five.duckdb")
}

var ranFiveFixture clitest.Once[string]

// TestEraseModelDeclaringSubject: a model that itself declares [privacy]
// subject is recomputed from its upstreams like any model, not erased from
// in place: its aggregate row that does not name alice (eu, whose last
// customer is bob) loses her note too, in every kept snapshot, and the
// model's snapshots rerun.
func TestEraseModelDeclaringSubject(t *testing.T) {
	t.Parallel()
	_, jobs, db := ranFive(t)
	profile := filepath.Join(jobs, "profile.toml")
	require.Equal(t, []string{"ap|carol|1|carolnote/carol1", "eu|bob|2|SECRETPAYLOADA1/SECRETPAYLOADP2|bobnote/bob1", "us|alice|1|SECRETPAYLOADA3/SECRETPAYLOADP2"},
		clitest.QueryStrs(t, db, `SELECT region || '|' || customer || '|' || accounts || '|' || notes FROM profile ORDER BY ALL`))
	// plain holds none of alice (TestEraseProjectWhereHeld).
	require.NoError(t, os.Remove(filepath.Join(jobs, "plain.toml")))

	code, out, errOut := clitest.InProcess(t, "erase", jobs, "--subject", "alice")
	require.Equal(t, 0, code, out+errOut)
	require.Equal(t, []string{"ap|carol|1|carolnote/carol1", "eu|bob|1|bobnote/bob1"},
		clitest.QueryStrs(t, db, `SELECT region || '|' || customer || '|' || accounts || '|' || notes FROM profile ORDER BY ALL`))
	require.Contains(t, out, "profile: recomputed without the subject")
	require.Equal(t, []string{"0"}, clitest.QueryStrs(t, db, `SELECT count(*) FROM idem.profile__history WHERE customer = 'alice' OR notes LIKE '%SECRET%'`))
	for _, s := range clitest.QueryStrs(t, db, `SELECT snapshot FROM idem.snapshots WHERE job = 'profile' ORDER BY snapshot`) {
		code, out, errOut = clitest.InProcess(t, "rerun", profile, "--snapshot", s, "--json")
		require.Equal(t, 0, code, "snapshot %s: %s", s, out+errOut)
		require.Contains(t, out, `"reproduced":true`, "snapshot %s", s)
	}
}

// TestEraseProjectWhereHeld: idem erase PROJECT_DIR --subject V erases V
// where it is and names the jobs that declare the subject and hold none of
// it (plain), exit 0; a subject that no job holds is exit 1 with nothing
// committed, naming the jobs looked in. Erasing the model that declares
// the subject alone, while its upstreams still hold it, is refused (exit
// 2) with nothing committed.
func TestEraseProjectWhereHeld(t *testing.T) {
	t.Parallel()
	_, jobs, db := ranFive(t)
	before := clitest.CaptureState(t, db)
	code, out, errOut := clitest.InProcess(t, "erase", filepath.Join(jobs, "profile.toml"), "--subject", "alice")
	require.Equal(t, 2, code, out+errOut)
	require.Contains(t, errOut, "model profile is computed from its upstreams (accounts, people)")
	require.Equal(t, before, clitest.CaptureState(t, db), "nothing committed")

	code, out, errOut = clitest.InProcess(t, "erase", jobs, "--subject", "nobody")
	require.Equal(t, 1, code, out+errOut)
	require.Contains(t, errOut, "erase subject nobody: no job that declares it holds it (looked in accounts, people, plain, profile); nothing committed")
	require.Equal(t, before, clitest.CaptureState(t, db), "nothing committed")

	code, out, errOut = clitest.InProcess(t, "erase", jobs, "--subject", "alice")
	require.Equal(t, 0, code, out+errOut)
	require.Contains(t, out, "people: erased subject \"alice\"")
	require.Contains(t, out, "accounts: erased subject \"alice\"")
	require.Contains(t, out, "plain: declares the subject and holds none of it; nothing erased there\n")
	code, out, errOut = clitest.InProcess(t, "erase", jobs, "--subject", "alice", "--json")
	require.Equal(t, 0, code, out+errOut)
	require.Contains(t, out, `"not_held":["plain","profile"]`)
	require.Contains(t, out, `"already_erased":true`)
}

// TestEraseKeyNotMatchedAsSubject: erase JOB --key 42 reaches a reader of
// the job by the key's own column (order_id), never by the reader's
// [privacy] subject columns, where "42" names another person: customer
// 42's order 7 stays. A reader that keeps none of the key's columns is
// refused (exit 2) rather than matched by its subject columns.
func TestEraseKeyNotMatchedAsSubject(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	w := func(rel, text string) { clitest.WriteFile(t, filepath.Join(dir, rel), text) }
	w("orders.toml", `name = "orders"
pipeline = "merge_by_key"
transform_version = 1
schema_version = 1
database = "shop.duckdb"
[input]
path = "landing/*.jsonl"
format = "jsonl"
mode = "files"
`+orderShape+clitest.DuckdbSection)
	w("ledger.toml", `name = "ledger"
pipeline = "merge_by_key"
transform_version = 2
schema_version = 1
database = "shop.duckdb"
[input]
upstream = ["orders"]
`+orderShape+`[privacy]
subject = ["customer"]
`+clitest.DuckdbSection)
	w("landing/1.jsonl", `{"order_id": 42, "customer": "c1", "note": "SECRETORDER42", "updated_at": 1}
{"order_id": 7, "customer": "42", "note": "order of customer 42", "updated_at": 1}
`)
	db := filepath.Join(dir, "shop.duckdb")
	code, out, errOut := clitest.InProcess(t, "run", dir)
	require.Equal(t, 0, code, out+errOut)
	code, out, errOut = clitest.InProcess(t, "erase", filepath.Join(dir, "orders.toml"), "--key", "42")
	require.Equal(t, 0, code, out+errOut)
	for _, table := range []string{"orders", "ledger"} {
		require.Equal(t, []string{"7|42"}, clitest.QueryStrs(t, db, `SELECT order_id || '|' || customer FROM `+table+` ORDER BY ALL`), table)
		require.Equal(t, []string{"0"}, clitest.QueryStrs(t, db, `SELECT count(*) FROM idem.`+table+`__history WHERE note LIKE '%SECRET%'`), table)
	}
	code, out, errOut = clitest.InProcess(t, "rerun", filepath.Join(dir, "ledger.toml"), "--json")
	require.Equal(t, 0, code, out+errOut)
	require.Contains(t, out, `"reproduced":true`)

	// A reader that renames the key's column keeps the key's rows where
	// they cannot be found: refused, not matched by its subject.
	moved := strings.NewReplacer(`"shop.duckdb"`, `"../shop.duckdb"`, `"landing/`, `"../landing/`)
	for _, f := range []string{"orders.toml", "ledger.toml"} {
		w("renamed/"+f, moved.Replace(readText(t, filepath.Join(dir, f))))
	}
	w("renamed/byref.toml", `name = "byref"
pipeline = "select"
transform_version = 1
database = "../shop.duckdb"
[input]
upstream = ["orders"]
[transform]
sql = "models/byref"
[target]
key = ["ref"]
`+clitest.DuckdbSection)
	w("renamed/models/byref/v1.sql", "SELECT order_id AS ref, customer, note, updated_at FROM {{upstream:orders}}\n")
	w("renamed/kept.toml", `name = "kept"
pipeline = "merge_by_key"
transform_version = 2
schema_version = 1
database = "../shop.duckdb"
[input]
upstream = ["byref"]
[input.columns]
ref = "BIGINT"
customer = "VARCHAR"
note = "VARCHAR"
updated_at = "BIGINT"
[target]
key = ["ref"]
order_by = "updated_at"
[privacy]
subject = ["customer"]
`+clitest.DuckdbSection)
	w("landing/2.jsonl", `{"order_id": 8, "customer": "7", "note": "order 8", "updated_at": 1}
`)
	code, out, errOut = clitest.InProcess(t, "run", filepath.Join(dir, "renamed"))
	require.Equal(t, 0, code, out+errOut)
	before := clitest.CaptureState(t, db)
	code, out, errOut = clitest.InProcess(t, "erase", filepath.Join(dir, "renamed", "orders.toml"), "--key", "7")
	require.Equal(t, 2, code, out+errOut)
	require.Contains(t, errOut, "job kept reads an erased job and keeps its rows in kept, but has none of the columns order_id")
	require.Equal(t, before, clitest.CaptureState(t, db), "nothing committed")
}

// orderShape is the columns and key of TestEraseKeyNotMatchedAsSubject's
// jobs.
const orderShape = `[input.columns]
order_id = "BIGINT"
customer = "VARCHAR"
note = "VARCHAR"
updated_at = "BIGINT"
[target]
key = ["order_id"]
order_by = "updated_at"
`

func readText(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	return string(data)
}

// TestEraseFiveJobChain is issue 43's erasure test: a chain of five jobs
// (people: apply; accounts: merge_by_key; profile: a model declaring the
// subject; totals: an aggregate model; plain: a job that declares a
// subject and holds none of alice), and beside them a job whose audit
// failed naming alice's row. After idem erase PROJECT --subject alice (and
// before any compact) no file under the database's folder holds her
// payload or identifier; no table holds them (idem.erasures, which
// records what was erased, aside); replays of every old file under a new
// name resurrect nothing; every kept snapshot of every job reruns (with
// IDEM_LONG=1; by default each job's erasures and latest); once
// compacted no file under the database's folder holds her payload.
func TestEraseFiveJobChain(t *testing.T) {
	t.Parallel()
	dir, jobs, db := ranFive(t)
	w := func(rel, text string) { clitest.WriteFile(t, filepath.Join(dir, rel), text) }
	// A second round, so that the chain has snapshots after alice's last
	// change.
	w("changes/b3.jsonl", `{"change_id":"5","entity_id":"bob","source_version":2,"operation":"upsert","value":"bob2"}`+"\n")
	w("landing/3.jsonl", `{"account_id": 5, "customer": "carol", "region": "ap", "note": "carol5", "updated_at": 1}`+"\n")
	w("rates/2.jsonl", `{"region": "us", "owner": "erin", "rate": 4}`+"\n")
	code, out, errOut := clitest.InProcess(t, "run", jobs)
	require.Equal(t, 0, code, out+errOut)

	// A job of the same database, outside the project, whose audit fails
	// on alice's row: its run log row is written, nothing committed.
	w("audits/watch.toml", `name = "watch"
pipeline = "select"
transform_version = 1
database = "../db/five.duckdb"
[input]
upstream = ["accounts"]
[transform]
sql = "models/watch"
[target]
key = ["account_id"]

[[audit]]
name = "no_alice"
kind = "sql"
sql = "SELECT customer, note FROM {{table}} WHERE customer = 'alice'"
`+clitest.DuckdbSection)
	w("audits/models/watch/v1.sql", "SELECT account_id, customer, note FROM {{upstream:accounts}}\n")
	code, out, errOut = clitest.InProcess(t, "run", filepath.Join(dir, "audits", "watch.toml"))
	require.Equal(t, 1, code, out+errOut)
	require.Contains(t, errOut, "alice", "the audit's failure names the row on stderr")

	code, out, errOut = clitest.InProcess(t, "erase", jobs, "--subject", "alice")
	require.Equal(t, 0, code, out+errOut)
	require.Contains(t, out, "plain: declares the subject and holds none of it; nothing erased there\n")
	require.NotContains(t, out, "SECRETPAYLOAD")
	// erase compacts by itself: no file under the database's folder (the
	// database, its replica, journal, retained inputs and checkpoints)
	// holds her payload or her identifier, the run log included.
	clitest.RequireNoPayload(t, filepath.Join(dir, "db"), "SECRETPAYLOAD", "")
	clitest.RequireNoPayload(t, filepath.Join(dir, "db"), "alice", "")

	// Every old file again under a new name.
	for _, f := range []string{"changes/b1.jsonl", "changes/b2.jsonl", "landing/1.jsonl", "landing/2.jsonl"} {
		w(strings.TrimSuffix(f, ".jsonl")+"-again.jsonl", readText(t, filepath.Join(dir, f)))
	}
	code, out, errOut = clitest.InProcess(t, "run", jobs)
	require.Equal(t, 0, code, out+errOut)
	require.Contains(t, out, "erased")
	requireNoSubjectInTables(t, db, []string{"alice", "SECRETPAYLOAD"})
	require.Equal(t, []string{"ap|carol|2|carolnote/carol1|carol5/carol1", "eu|bob|1|bobnote/bob2"},
		clitest.QueryStrs(t, db, `SELECT region || '|' || customer || '|' || accounts || '|' || notes FROM profile ORDER BY ALL`))
	require.Equal(t, []string{"all|2|3|carolnote/carol1|carol5/carol1;bobnote/bob2"},
		clitest.QueryStrs(t, db, `SELECT scope || '|' || regions || '|' || accounts || '|' || notes FROM totals`))
	clitest.RequireNoPayload(t, db+".inputs", "SECRETPAYLOAD", "")
	clitest.RequireNoPayload(t, db+".inputs", "alice", "")

	// Every kept snapshot reruns: by default each job's erasures and
	// latest (every one with IDEM_LONG=1).
	for _, name := range []string{"people", "accounts", "profile", "totals", "plain"} {
		file := filepath.Join(jobs, name+".toml")
		all := clitest.LongTests()
		snaps := clitest.QueryStrs(t, db, `SELECT snapshot FROM idem.snapshots AS s WHERE job = $1 AND snapshot >= coalesce((SELECT oldest_kept FROM idem.retention WHERE job = $1), 1)
			AND ($2 OR kind = 'erase' OR snapshot = (SELECT max(snapshot) FROM idem.snapshots WHERE job = $1)) ORDER BY snapshot`, name, all)
		require.NotEmpty(t, snaps, name)
		for _, s := range snaps {
			code, out, errOut := clitest.InProcess(t, "rerun", file, "--snapshot", s, "--json")
			require.Equal(t, 0, code, "%s snapshot %s: %s", name, s, out+errOut)
			require.Contains(t, out, `"reproduced":true`, "%s snapshot %s", name, s)
		}
	}

	code, out, errOut = clitest.InProcess(t, "compact", "--db", db)
	require.Equal(t, 0, code, out+errOut)
	clitest.RequireNoPayload(t, filepath.Join(dir, "db"), "SECRETPAYLOAD", "")
	clitest.RequireNoPayload(t, filepath.Join(dir, "db"), "alice", "")
}

// requireNoSubjectInTables fails when a row of a table of the database,
// idem's own included (idem.erasures aside: it names what was erased), holds
// one of texts.
func requireNoSubjectInTables(t *testing.T, db string, texts []string) {
	t.Helper()
	tables := clitest.QueryStrs(t, db, `SELECT schema_name || '.' || table_name FROM duckdb_tables() WHERE NOT internal AND database_name = current_database()
		AND (schema_name, table_name) <> ('idem', 'erasures') ORDER BY ALL`)
	require.NotEmpty(t, tables)
	for _, table := range tables {
		for _, text := range texts {
			require.Equal(t, []string{"0"}, clitest.QueryStrs(t, db, `SELECT count(*) FROM `+table+` AS t WHERE CAST(t AS VARCHAR) LIKE ?`, "%"+text+"%"), "%s holds %s", table, text)
		}
	}
}
