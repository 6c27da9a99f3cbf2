package crashtest

import (
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/idem-dev/idem/cmd/idem/cli/internal/clitest"
	"github.com/idem-dev/idem/internal/catalog"
	"github.com/idem-dev/idem/internal/report"
	"github.com/idem-dev/idem/internal/run"
	"github.com/stretchr/testify/require"
)

// legacyFixture is a database made by the release before catalog versions
// (see testdata/legacy-e77bdc9/README.md).
const legacyFixture = "testdata/legacy-e77bdc9"

// todayFixture is a database made by the release of 54a13ca, the last
// on DuckDB 1.5.6 (see testdata/legacy-54a13ca/README.md).
const todayFixture = "testdata/legacy-54a13ca"

// legacyCopy copies the legacy fixture into a new temporary folder and
// gunzips its database there; it returns the folder.
func legacyCopy(t *testing.T) string {
	t.Helper()
	return fixtureCopy(t, legacyFixture, "legacy.duckdb")
}

// fixtureCopy copies the fixture folder into a new temporary folder and
// gunzips its database, name, there; it returns the folder.
func fixtureCopy(t *testing.T, fixture, name string) string {
	t.Helper()
	dir := t.TempDir()
	require.NoError(t, os.CopyFS(dir, os.DirFS(fixture)))
	gz := filepath.Join(dir, name+".gz")
	in, err := os.Open(gz)
	require.NoError(t, err)
	defer in.Close()
	zr, err := gzip.NewReader(in)
	require.NoError(t, err)
	out, err := os.Create(filepath.Join(dir, name))
	require.NoError(t, err)
	_, err = io.Copy(out, zr)
	require.NoError(t, err)
	require.NoError(t, out.Close())
	require.NoError(t, os.Remove(gz))
	return dir
}

// fileSig is a file's sha256 and modification time.
func fileSig(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	st, err := os.Stat(path)
	require.NoError(t, err)
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:]) + " " + st.ModTime().Format(time.RFC3339Nano)
}

// legacyIdem runs the CLI in-process and requires exit code want; it
// returns stdout.
func legacyIdem(t *testing.T, want int, args ...string) string {
	t.Helper()
	code, stdout, stderr := clitest.InProcess(t, args...)
	require.Equal(t, want, code, "idem %v\nstdout: %s\nstderr: %s", args, stdout, stderr)
	return stdout
}

// TestLegacyDatabase opens a database written by idem e77bdc9: reading
// commands read it as it is without writing a byte; the first writable
// open migrates it to the latest catalog version (version row, the
// ledger's unique constraint); every snapshot then exports the sha256 the old
// binary exported and reruns to it, and writing commands work on it.
func TestLegacyDatabase(t *testing.T) {
	t.Parallel()
	dir := legacyCopy(t)
	db := filepath.Join(dir, "legacy.duckdb")
	jobFile := func(name string) string { return filepath.Join(dir, name+".toml") }
	out := t.TempDir()

	// Read-only: every reading command, and the file is unchanged.
	before := fileSig(t, db)
	require.Equal(t, []string{}, clitest.QueryStrs(t, db, `SELECT value FROM idem.meta WHERE key = 'catalog_version'`))
	legacyIdem(t, 0, "export", jobFile("customer_state"), "--snapshot", "2", "--out", filepath.Join(out, "ro.csv"))
	legacyIdem(t, 0, "log", jobFile("orders"))
	legacyIdem(t, 0, "query", "--db", db, "SELECT count(*) FROM idem.ledger")
	legacyIdem(t, 0, "diff", jobFile("customer_state"), "--from", "1", "--to", "4")
	legacyIdem(t, 0, "plan", jobFile("sample"), "--input", filepath.Join(dir, "inputs", "occurrences-b.csv"))
	legacyIdem(t, 0, "rerun", jobFile("customer_state"), "--snapshot", "3")
	require.Equal(t, before, fileSig(t, db), "a reading command wrote the old database")
	require.NoFileExists(t, db+".wal")

	// The first writable open migrates.
	var res struct{ Decision string }
	require.NoError(t, json.Unmarshal([]byte(legacyIdem(t, 0, "run", jobFile("sample"), "--input", filepath.Join(dir, "inputs", "occurrences-b.csv"), "--json")), &res))
	require.Equal(t, report.DecisionSkipped, res.Decision)
	// The job keys this idem computes are the ones release e77bdc9
	// recorded: the chain runs again and commits nothing (a model whose key
	// changed would reload, a merge_by_key job would reapply its batch).
	var chain []struct{ Job, Decision string }
	require.NoError(t, json.Unmarshal([]byte(legacyIdem(t, 0, "run", jobFile("trips"), jobFile("zones"), jobFile("trips_clean"), jobFile("trips_daily"), "--json")), &chain))
	require.Len(t, chain, 4)
	for _, c := range chain {
		require.Contains(t, []string{report.DecisionSkipped, report.DecisionAlreadyCommitted}, c.Decision, "%s after the migration", c.Job)
	}
	latest, err := catalog.LatestVersion()
	require.NoError(t, err)
	require.Equal(t, []string{strconv.Itoa(latest)}, clitest.QueryStrs(t, db, `SELECT value FROM idem.meta WHERE key = 'catalog_version'`))
	// Catalog version 6: the erased key is kept as its salted hash.
	require.Equal(t, []string{"0 1"}, clitest.QueryStrs(t, db, `SELECT count(*) FILTER (WHERE key = 'account-2') || ' ' || count(*) FILTER (WHERE key = sha256(salt || 'account-2')) FROM idem.erasures`))
	require.Equal(t, []string{"UNIQUE(job, batch_id)"}, clitest.QueryStrs(t, db,
		`SELECT DISTINCT constraint_text FROM duckdb_constraints()
		WHERE database_name = current_database() AND schema_name = 'idem' AND table_name = 'ledger' AND constraint_type = 'UNIQUE'`))

	// Every snapshot exports as the old binary exported it, and reruns to
	// those bytes: all of them, so that an engine upgrade that changes the
	// bytes of any committed snapshot fails here.
	checkSnapshots(t, legacyFixture, jobFile, filepath.Join(out, "after"), 16, true)

	// Writing commands: a fence, a new batch into the indexed ledger, its
	// retry, and the same batch id with other rows.
	var fence struct{ Epoch int64 }
	require.NoError(t, json.Unmarshal([]byte(legacyIdem(t, 0, "fence", jobFile("orders"), "--json")), &fence))
	require.Equal(t, int64(3), fence.Epoch)
	day48 := filepath.Join(dir, "inputs", "day-48.jsonl")
	require.NoError(t, json.Unmarshal([]byte(legacyIdem(t, 0, "run", jobFile("orders"), "--epoch", "3", "--input", day48, "--json")), &res))
	require.Equal(t, report.DecisionAlreadyCommitted, res.Decision)
	batch3 := filepath.Join(dir, "inputs", "batch-3.jsonl")
	for _, want := range []string{report.DecisionApplied, report.DecisionAlreadyCommitted} {
		require.NoError(t, json.Unmarshal([]byte(legacyIdem(t, 0, "run", jobFile("customer_state"), "--input", batch3, "--batch-id", "batch-4", "--json")), &res))
		require.Equal(t, want, res.Decision)
	}
	legacyIdem(t, report.ExitRefused, "run", jobFile("customer_state"), "--input", filepath.Join(dir, "inputs", "batch-2.jsonl"), "--batch-id", "batch-4")
	require.Equal(t, []int64{1}, clitest.QueryInts(t, db, `SELECT count(*) FROM idem.ledger WHERE job = 'customer_state' AND batch_id = 'batch-4'`))
}

// expectedSnapshot is one entry of a fixture's expected.json: what the
// binary that made the database printed for a snapshot. ExportExit is 0
// for a kept snapshot, 3 for an expired one (absent: 0).
type expectedSnapshot struct {
	Job        string `json:"job"`
	Snapshot   int64  `json:"snapshot"`
	ExportExit int    `json:"export_exit"`
	SHA256     string `json:"sha256"`
	RerunExit  int    `json:"rerun_exit"`
}

// checkSnapshots checks every snapshot the fixture's expected.json lists
// (n of them) against the database copied beside jobFile: a kept one
// exports the sha256 the old binary exported and, with rerun, reruns to it
// (exit 0); an expired one is refused by both (exit 3). out is a new
// folder for the exports.
func checkSnapshots(t *testing.T, fixture string, jobFile func(string) string, out string, n int, rerun bool) {
	t.Helper()
	require.NoError(t, os.MkdirAll(out, 0o755))
	data, err := os.ReadFile(filepath.Join(fixture, "expected.json"))
	require.NoError(t, err)
	var expected []expectedSnapshot
	require.NoError(t, json.Unmarshal(data, &expected))
	require.Len(t, expected, n)
	for _, e := range expected {
		snap := strconv.FormatInt(e.Snapshot, 10)
		stdout := legacyIdem(t, e.ExportExit, "export", jobFile(e.Job), "--snapshot", snap,
			"--out", filepath.Join(out, e.Job+"-"+snap+".csv"), "--json")
		if e.ExportExit != 0 {
			continue
		}
		var exp struct{ SHA256 string }
		require.NoError(t, json.Unmarshal([]byte(stdout), &exp))
		require.Equal(t, e.SHA256, exp.SHA256, "export %s --snapshot %d", e.Job, e.Snapshot)
	}
	if !rerun {
		return
	}
	t.Run("rerun", func(t *testing.T) {
		for _, e := range expected {
			t.Run(e.Job+"@"+strconv.FormatInt(e.Snapshot, 10), func(t *testing.T) {
				t.Parallel() // reruns only read the database
				// A kept snapshot reruns to its bytes (exit 0), whatever
				// the old binary's rerun gave; an expired one is refused
				// as it was.
				want := 0
				if e.ExportExit != 0 {
					want = e.RerunExit
				}
				stdout := legacyIdem(t, want, "rerun", jobFile(e.Job), "--snapshot", strconv.FormatInt(e.Snapshot, 10), "--json")
				if e.ExportExit != 0 {
					return
				}
				var rr struct {
					Reproduced   bool
					SHA256       string
					Rebuilt      string `json:"rebuilt_sha256"`
					UnsignedZero bool   `json:"unsigned_zero"`
				}
				require.NoError(t, json.Unmarshal([]byte(stdout), &rr))
				require.True(t, rr.Reproduced)
				require.Equal(t, e.SHA256, rr.SHA256)
				require.Equal(t, e.SHA256, rr.Rebuilt)
				// Only DuckDB 1.5's unsigned zeros need the sign dropped
				// (testdata/legacy-54a13ca/README.md): trips_except's
				// EXCEPT ALL, and trips_zero's snapshot 1, read from
				// history.
				require.Equal(t, e.Job == "trips_except" || e.Job == "trips_zero" && e.Snapshot == 1, rr.UnsignedZero, "unsigned_zero")
			})
		}
	})
}

// TestTodayDatabase opens a database written by the release of 54a13ca
// (DuckDB 1.5.6, catalog version 5): reading commands leave it as it is;
// the first writable open migrates it; every kept snapshot then exports
// the sha256 that release exported and reruns to it, the expired one is
// refused, and a run commits on it.
func TestTodayDatabase(t *testing.T) {
	t.Parallel()
	dir := fixtureCopy(t, todayFixture, "today.duckdb")
	db := filepath.Join(dir, "today.duckdb")
	jobFile := func(name string) string { return filepath.Join(dir, name+".toml") }
	out := t.TempDir()

	before := fileSig(t, db)
	require.Equal(t, []string{"5"}, clitest.QueryStrs(t, db, `SELECT value FROM idem.meta WHERE key = 'catalog_version'`))
	checkSnapshots(t, todayFixture, jobFile, filepath.Join(out, "before"), 21, false)
	require.Equal(t, before, fileSig(t, db), "a reading command wrote the old database")
	require.NoFileExists(t, db+".wal")

	var chain []struct{ Job, Decision string }
	require.NoError(t, json.Unmarshal([]byte(legacyIdem(t, 0, "run", jobFile("trips"), jobFile("zones"), jobFile("trips_clean"),
		jobFile("trips_daily"), jobFile("trips_typed"), jobFile("trips_zero"), jobFile("trips_except"), "--json")), &chain))
	require.Len(t, chain, 7)
	for _, c := range chain {
		require.Contains(t, []string{report.DecisionSkipped, report.DecisionAlreadyCommitted}, c.Decision, "%s after the migration", c.Job)
	}
	latest, err := catalog.LatestVersion()
	require.NoError(t, err)
	require.Equal(t, []string{strconv.Itoa(latest)}, clitest.QueryStrs(t, db, `SELECT value FROM idem.meta WHERE key = 'catalog_version'`))
	checkSnapshots(t, todayFixture, jobFile, filepath.Join(out, "after"), 21, true)

	var res struct{ Decision string }
	batch3 := filepath.Join(dir, "inputs", "batch-3.jsonl")
	require.NoError(t, json.Unmarshal([]byte(legacyIdem(t, 0, "run", jobFile("customer_state"), "--input", batch3, "--batch-id", "batch-5", "--json")), &res))
	require.Equal(t, report.DecisionApplied, res.Decision)

	// The file keeps the storage format DuckDB 1.5.6 wrote; a new
	// database is created in one DuckDB 1.5 reads (run.StorageVersion).
	fresh := filepath.Join(out, "fresh.duckdb")
	legacyIdem(t, 0, "run", jobFile("zones"), "--db", fresh)
	storage := `SELECT tags['storage_version'] FROM duckdb_databases() WHERE database_name = current_database()`
	require.Equal(t, []string{"v1.0.0+"}, clitest.QueryStrs(t, db, storage))
	require.Equal(t, []string{run.StorageVersion + "+"}, clitest.QueryStrs(t, fresh, storage))

	// An idem on DuckDB 1.5 (catalog version 5) refuses both, exit 3,
	// naming both catalog versions: IDEM_OLD_IDEM names such a binary
	// (go build -o /tmp/idem-156 ./cmd/idem at 54a13ca).
	old := os.Getenv("IDEM_OLD_IDEM")
	if old == "" {
		t.Log("IDEM_OLD_IDEM not set: the refusal by an idem on DuckDB 1.5 is not checked")
		return
	}
	for _, path := range []string{db, fresh} {
		cmd := exec.Command(old, "export", jobFile("zones"), "--db", path, "--out", filepath.Join(out, "old.csv"))
		stderr, err := cmd.CombinedOutput()
		var exit *exec.ExitError
		require.ErrorAs(t, err, &exit, "%s", stderr)
		require.Equal(t, report.ExitRefused, exit.ExitCode(), "%s", stderr)
		require.Contains(t, string(stderr), "has catalog version "+strconv.Itoa(latest)+"; this idem reads up to 5")
	}
}
