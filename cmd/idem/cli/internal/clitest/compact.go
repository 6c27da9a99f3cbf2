package clitest

import (
	"bytes"
	"database/sql"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"testing"

	"github.com/idem-dev/idem/internal/dbfile"
	"github.com/idem-dev/idem/internal/sqltext"

	"github.com/stretchr/testify/require"
)

// SecretPayload is the value the erased subject carries in CompactJob.
// Every value of that batch is random text like it, which DuckDB stores
// uncompressed, so a byte search of the file finds the payload as long as
// any block holds it.
var SecretPayload = randomText(rand.New(rand.NewPCG(9, 9)), 48)

// randomText is n characters drawn from 88 printable ones: text no string
// compression shortens.
func randomText(rng *rand.Rand, n int) string {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789!#$%&()*+,-./:;<=>?@[]^_{|}~"
	b := make([]byte, n)
	for i := range b {
		b[i] = alphabet[rng.IntN(len(alphabet))]
	}
	return string(b)
}

// CompactJob is a versioned_changes job with three batches and history,
// and a subject ("subject-9", whose value is SecretPayload) erased after
// them: its rows were in the target, history, outcomes and retained
// inputs, and the erasure left their bytes in the file's free blocks. It
// is a copy of a fixture made once per package run.
func CompactJob(t *testing.T) *GuardJob {
	t.Helper()
	return compactFixture.Get(t, func(t *testing.T) *GuardJob {
		j := NewGuardJob(t)
		j.Apply()
		var lines []string
		rng := rand.New(rand.NewPCG(1, 2))
		for i := range 400 {
			lines = append(lines, fmt.Sprintf(`{"change_id":"p-%d","entity_id":"bulk-%d","source_version":1,"operation":"upsert","value":%q}`, i, i, randomText(rng, 48)))
		}
		lines = append(lines, `{"change_id":"s-1","entity_id":"subject-9","source_version":1,"operation":"upsert","value":"`+SecretPayload+`"}`)
		j.Apply("--input", j.Input("bulk.jsonl", lines...))
		require.True(t, FileHolds(t, j.DB, SecretPayload), "the test needs the payload stored as plain bytes")
		j.Apply("--input", ChangesFixture(t, "batch-2.jsonl"))
		r := CallIdem(t, "erase", j.File, "--key", "subject-9", "--json", "--no-compact") // compact is the test
		require.Equal(t, 0, r.Code, r.Stderr)
		f := GuardJobAt(t, FixtureDir(t, "compact"))
		CopyDir(t, j.Dir, f.Dir)
		return f
	}).Copy(t)
}

var compactFixture Once[*GuardJob]

// FileHolds reports whether the file at path holds the bytes of s.
func FileHolds(t *testing.T, path, s string) bool {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return bytes.Contains(b, []byte(s))
}

// RawDB opens the database file at path in DuckDB without idem, attached
// under another name (a file named idem.duckdb would make the schema name
// idem ambiguous), for tests that change it behind idem's back.
func RawDB(t *testing.T, path string) *sql.DB {
	t.Helper()
	db, err := sql.Open("duckdb", "")
	require.NoError(t, err)
	db.SetMaxOpenConns(1)
	_, err = db.Exec("ATTACH " + sqltext.SQLString(path) + " AS raw; USE raw")
	require.NoError(t, err)
	return db
}

// CompactOK runs `idem compact --json` on the database at db, requires
// exit 0 and returns its report.
func CompactOK(t *testing.T, db string) dbfile.CompactResult {
	t.Helper()
	r := CallIdem(t, "compact", "--db", db, "--json")
	require.Equal(t, 0, r.Code, "compact: %s", r.Stderr)
	var res dbfile.CompactResult
	require.NoError(t, json.Unmarshal([]byte(r.Stdout), &res), r.Stdout)
	return res
}
