package datatest

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/idem-dev/idem/internal/report"

	"github.com/idem-dev/idem/cmd/idem/cli/internal/clitest"
	"github.com/stretchr/testify/require"
)

// treeDigest is the sha256 of every file under root, by path.
func treeDigest(t *testing.T, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	require.NoError(t, filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(p)
		sum := sha256.Sum256(data)
		out[p] = hex.EncodeToString(sum[:])
		return err
	}))
	return out
}

// traceProject writes into dir a merge_by_key job "stock" whose subject
// column is email, with a not_null audit on qty, and a model "owners"
// keyed by email over it, both with the read replica on, the database in
// dir/db. It returns the two job files.
func traceProject(t *testing.T, dir string) (stock, owners string) {
	t.Helper()
	settings := "[retention]\ncheckpoint_every = 1\n[duckdb]\nthreads = " + clitest.TestThreads + "\nread_replica = true\n"
	stock = filepath.Join(dir, "jobs", "stock.toml")
	clitest.WriteFile(t, stock, `name = "stock"
pipeline = "merge_by_key"
transform_version = 1
schema_version = 1
database = "../db/trace.duckdb"
[input]
path = "../in/b1.csv"
[input.columns]
sku = "BIGINT"
email = "VARCHAR"
note = "VARCHAR"
qty = "BIGINT"
[target]
key = ["sku"]
[privacy]
subject = ["email"]
[[audit]]
kind = "not_null"
columns = ["qty"]
`+settings)
	owners = filepath.Join(dir, "jobs", "owners.toml")
	clitest.WriteFile(t, owners, `name = "owners"
pipeline = "select"
transform_version = 1
database = "../db/trace.duckdb"
[input]
upstream = ["stock"]
[transform]
sql = "models/owners"
[target]
key = ["email"]
`+settings)
	clitest.WriteFile(t, filepath.Join(dir, "jobs", "models", "owners", "v1.sql"), "SELECT email, note FROM {{upstream:stock}}\n")
	return stock, owners
}

// logText is every message of the run log of the job, as idem log --json
// prints them.
func logText(t *testing.T, jobFile string) string {
	t.Helper()
	code, out, errOut := clitest.InProcess(t, "log", jobFile, "--json")
	require.Equal(t, 0, code, out+errOut)
	var res struct {
		Runs []struct {
			Decision string  `json:"decision"`
			Message  *string `json:"message"`
		} `json:"runs"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &res), out)
	var b strings.Builder
	for _, r := range res.Runs {
		b.WriteString(r.Decision + ": ")
		if r.Message != nil {
			b.WriteString(*r.Message)
		}
		b.WriteString("\n")
	}
	return b.String()
}

// tracedRun writes traceProject into a new folder with an input b1.csv
// of rows, and runs stock over it: it returns the folder, the two job
// files and the database.
func tracedRun(t *testing.T, rows string) (dir, stock, owners, db string) {
	t.Helper()
	dir = t.TempDir()
	stock, owners = traceProject(t, dir)
	db = filepath.Join(dir, "db", "trace.duckdb")
	clitest.WriteFile(t, filepath.Join(dir, "in", "b1.csv"), "sku,email,note,qty\n"+rows)
	code, out, errOut := clitest.InProcess(t, "run", stock)
	require.Equal(t, 0, code, out+errOut)
	return dir, stock, owners, db
}

// TestRunLogKeepsNoRowValues (issue 43): a failed audit's violating row
// and a model's duplicate key are printed on stderr when they happen, but
// the run log keeps their counts only; after the subject is erased
// neither a message an older idem wrote quoting her,
// nor idem log, nor the database file, nor its
// read replica holds the subject's identifier or payload.
func TestRunLogKeepsNoRowValues(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	stock, owners := traceProject(t, dir)
	db := filepath.Join(dir, "db", "trace.duckdb")
	const who, payload = "alice@example.org", "SECRETNOTEQ7"
	in := func(name, rows string) string {
		p := filepath.Join(dir, "in", name)
		clitest.WriteFile(t, p, "sku,email,note,qty\n"+rows)
		return p
	}
	// The audit fails on alice's row: stderr names it, the log does not.
	code, out, errOut := clitest.InProcess(t, "run", stock, "--input", in("b0.csv", "1,"+who+","+payload+",\n2,bob@example.org,bob,3\n"))
	require.Equal(t, 1, code, out+errOut)
	require.Contains(t, errOut, who)
	require.Contains(t, errOut, payload)
	// Alice holds two skus: the model's key check fails naming her.
	code, out, errOut = clitest.InProcess(t, "run", stock, "--input", in("b1.csv", "1,"+who+","+payload+",1\n2,bob@example.org,bob,3\n3,"+who+","+payload+"2,4\n"))
	require.Equal(t, 0, code, out+errOut)
	code, out, errOut = clitest.InProcess(t, "run", owners)
	require.Equal(t, 1, code, out+errOut)
	require.Contains(t, errOut, who)
	// sku 3 moves to carol: the model loads.
	code, out, errOut = clitest.InProcess(t, "run", stock, "--input", in("b2.csv", "3,carol@example.org,carol,4\n"))
	require.Equal(t, 0, code, out+errOut)
	code, out, errOut = clitest.InProcess(t, "run", owners)
	require.Equal(t, 0, code, out+errOut)

	logs := logText(t, stock) + logText(t, owners)
	require.Contains(t, logs, "audit not_null_qty (not_null, error) found 1 violation(s)")
	require.Contains(t, logs, "must be unique and not NULL: 1 key value(s) repeated or NULL")
	require.NotContains(t, logs, who, "the run log keeps no row values")
	require.NotContains(t, logs, payload, "the run log keeps no row values")

	// A message as an older idem wrote it, quoting the row: the erasure
	// removes it.
	clitest.ExecSQL(t, db, "INSERT INTO idem.runs (job, run_at, decision, changed, message) VALUES ('stock', current_timestamp, 'failed', '[]', 'audit found: email="+who+", note="+payload+"')")
	require.Contains(t, logText(t, stock), payload)
	code, out, errOut = clitest.InProcess(t, "erase", stock, "--subject", who)
	require.Equal(t, 0, code, out+errOut)
	logs = logText(t, stock) + logText(t, owners)
	require.NotContains(t, logs, who)
	require.NotContains(t, logs, payload)
	require.Contains(t, logs, "message removed by the erasure of snapshot 3 of job stock")
	for _, f := range []string{db, db + ".read.duckdb"} {
		clitest.RequireNoPayload(t, filepath.Dir(f), payload, "")
	}
}

// TestLostDatabaseRefused (issue 43): a database deleted or truncated to
// 0 bytes beside its erasure journal, read replica and retained inputs is
// not created anew (exit 3, naming each and how to restore), and nothing
// beside it changes; restored from the replica it opens again.
func TestLostDatabaseRefused(t *testing.T) {
	t.Parallel()
	_, stock, _, db := tracedRun(t, "1,alice@example.org,a,1\n2,bob@example.org,b,2\n")
	code, out, errOut := clitest.InProcess(t, "erase", stock, "--subject", "alice@example.org")
	require.Equal(t, 0, code, out+errOut)
	replica, err := os.ReadFile(db + ".read.duckdb")
	require.NoError(t, err)
	for _, lose := range []string{"missing", "empty (0 bytes)"} {
		_ = os.Remove(db)
		_ = os.Remove(db + ".wal")
		if lose != "missing" {
			clitest.WriteFile(t, db, "")
		}
		beside := treeDigest(t, filepath.Dir(db))
		for _, args := range [][]string{{"run", stock}, {"fence", stock}} {
			code, out, errOut = clitest.InProcess(t, args...)
			require.Equal(t, report.ExitRefused, code, out+errOut)
			for _, want := range []string{"database " + db + " is " + lose, db + ".erasures (2 erasure(s))", "the read replica " + db + ".read.duckdb",
				"the retained-input store " + db + ".inputs", "--replay-journal", "nothing was created"} {
				require.Contains(t, errOut, want)
			}
			require.Equal(t, beside, treeDigest(t, filepath.Dir(db)), "nothing beside the lost database changes")
		}
	}
	// Restored from its replica, it opens: the erasure is there.
	require.NoError(t, os.WriteFile(db, replica, 0o644))
	code, out, errOut = clitest.InProcess(t, "run", stock)
	require.Equal(t, 0, code, out+errOut)
	require.Equal(t, []string{"0"}, clitest.QueryStrs(t, db, `SELECT count(*) FROM stock WHERE email = 'alice@example.org'`))
}

// TestEraseCompactsByItself (issue 43): idem erase alone leaves no byte of
// the subject's payload in the database file's free blocks (it compacts
// after the erasure, and says so); with --no-compact it says on stderr
// that the free blocks may hold them, and idem compact removes them.
func TestEraseCompactsByItself(t *testing.T) {
	t.Parallel()
	for _, skip := range []bool{false, true} {
		t.Run(map[bool]string{false: "compact", true: "no-compact"}[skip], func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			stock, _ := traceProject(t, dir)
			db := filepath.Join(dir, "db", "trace.duckdb")
			const payload = "SECRETPAYLOADZ9"
			var rows strings.Builder
			rows.WriteString("sku,email,note,qty\n")
			for i := range 200 {
				fmt.Fprintf(&rows, "%d,alice@example.org,%s-%d,1\n%d,bob@example.org,bob-%d,2\n", 2*i, payload, i, 2*i+1, i)
			}
			clitest.WriteFile(t, filepath.Join(dir, "in", "b1.csv"), rows.String())
			code, out, errOut := clitest.InProcess(t, "run", stock)
			require.Equal(t, 0, code, out+errOut)
			args := []string{"erase", stock, "--subject", "alice@example.org"}
			if skip {
				args = append(args, "--no-compact")
			}
			code, out, errOut = clitest.InProcess(t, args...)
			require.Equal(t, 0, code, out+errOut)
			if skip {
				require.Contains(t, errOut, "--no-compact: the free blocks of "+db+" may still hold the erased rows' bytes until idem compact")
				require.NotContains(t, out, "compacted")
				clitest.RequireNoPayload(t, filepath.Dir(db), payload, db)
				code, out, errOut = clitest.InProcess(t, "compact", "--db", db)
				require.Equal(t, 0, code, out+errOut)
			}
			clitest.RequireNoPayload(t, filepath.Dir(db), payload, "")
			if !skip {
				require.Contains(t, out, "compacted "+db+": ")
			}
			require.Equal(t, []string{"200"}, clitest.QueryStrs(t, db, `SELECT count(*) FROM stock`))
		})
	}
}

// TestErrorsNotSwallowed (issue 43): an erasure whose journal cannot be
// written says so (exit 1, the erasure committed; the next open writes
// the journal), and idem log refuses a run log row whose JSON does not
// read back instead of printing it empty.
func TestErrorsNotSwallowed(t *testing.T) {
	t.Parallel()
	_, stock, _, db := tracedRun(t, "1,alice@example.org,a,1\n2,bob@example.org,b,2\n")
	// The journal's path leads into a folder that does not exist.
	require.NoError(t, os.Symlink(filepath.Join(filepath.Dir(db), "gone", "journal"), db+".erasures"))
	code, out, errOut := clitest.InProcess(t, "erase", stock, "--subject", "alice@example.org")
	require.Equal(t, 1, code, out+errOut)
	require.Contains(t, errOut, "the erasure is committed, but the erasure journal "+db+".erasures was not written")
	require.Equal(t, []string{"0"}, clitest.QueryStrs(t, db, `SELECT count(*) FROM stock WHERE email = 'alice@example.org'`))
	require.NoError(t, os.Remove(db+".erasures"))
	code, out, errOut = clitest.InProcess(t, "erase", stock, "--subject", "alice@example.org")
	require.Equal(t, 0, code, out+errOut)
	require.Contains(t, out, "already erased")
	journal, err := os.ReadFile(db + ".erasures")
	require.NoError(t, err)
	require.Equal(t, 2, strings.Count(string(journal), "\n"), "the next open wrote the journal: %s", journal)

	clitest.ExecSQL(t, db, `UPDATE idem.runs SET outcomes = '{not json' WHERE job = 'stock' AND decision = 'applied'`)
	code, out, errOut = clitest.InProcess(t, "log", stock)
	require.Equal(t, 1, code, out+errOut)
	require.Contains(t, errOut, "read log of stock: outcomes \"{not json\"")
}

// TestErasedIdentifierInNoFile (issue 43): after idem erase alone, no file
// under the database's folder (the database file, its read replica, the
// erasure journal, the retained inputs and checkpoints, a backup taken
// after) holds the erased subject's identifier or payload: idem.erasures
// keeps the journal's salted hash. The erasure still guards: erasing again
// finds it (already erased), and a replay of the key's old batch under a
// new name is dropped as erased.
func TestErasedIdentifierInNoFile(t *testing.T) {
	t.Parallel()
	const who, payload = "alice.zq@example.org", "SECRETPAYLOADW4"
	dir, stock, owners, db := tracedRun(t, "1,"+who+","+payload+",1\n2,bob@example.org,b,2\n")
	code, out, errOut := clitest.InProcess(t, "run", owners)
	require.Equal(t, 0, code, out+errOut)
	clitest.WriteFile(t, filepath.Join(dir, "in", "b2.csv"), "sku,email,note,qty\n1,"+who+","+payload+"-2,5\n")
	code, out, errOut = clitest.InProcess(t, "run", stock, "--input", filepath.Join(dir, "in", "b2.csv"))
	require.Equal(t, 0, code, out+errOut)

	code, out, errOut = clitest.InProcess(t, "erase", stock, "--subject", who)
	require.Equal(t, 0, code, out+errOut)
	code, out, errOut = clitest.InProcess(t, "backup", "--db", db, "--out", filepath.Join(filepath.Dir(db), "backup"))
	require.Equal(t, 0, code, out+errOut)
	for _, s := range []string{who, payload} {
		clitest.RequireNoPayload(t, filepath.Dir(db), s, "")
	}
	require.Equal(t, []string{"stock 1 true"}, clitest.QueryStrs(t, db, `SELECT job || ' ' || count(*) || ' ' || bool_and(key = sha256(salt || ?)) FROM idem.erasures WHERE subject_columns IS NOT NULL GROUP BY job`, who))

	code, out, errOut = clitest.InProcess(t, "erase", stock, "--subject", who)
	require.Equal(t, 0, code, out+errOut)
	require.Contains(t, out, "already erased")
	code, out, errOut = clitest.InProcess(t, "erase", stock, "--key", "1")
	require.Equal(t, 0, code, out+errOut)
	require.Contains(t, out, "already erased", "the subject's key was erased with it")
}
