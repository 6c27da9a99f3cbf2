package crashtest

import (
	"database/sql"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/idem-dev/idem/cmd/idem/cli/internal/clitest"
	"github.com/idem-dev/idem/internal/catalog"
	"github.com/idem-dev/idem/internal/report"
	"github.com/stretchr/testify/require"
)

// captureAll reads every table of the database at path (idem.runs and
// idem.commits included), its indexes and its catalog version, opened
// read-only with the driver itself: what a refused command must not
// change, whichever version the database is at.
func captureAll(t *testing.T, path string) map[string]string {
	t.Helper()
	db, err := sql.Open("duckdb", path+"?access_mode=read_only")
	require.NoError(t, err)
	defer db.Close()
	text := func(query string) string {
		rows, err := db.Query(query)
		require.NoError(t, err, query)
		defer rows.Close()
		cols, err := rows.Columns()
		require.NoError(t, err)
		var b strings.Builder
		b.WriteString(strings.Join(cols, ",") + "\n")
		for rows.Next() {
			vals := make([]any, len(cols))
			ptrs := make([]any, len(cols))
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			require.NoError(t, rows.Scan(ptrs...))
			b.WriteString(fmt.Sprintln(vals...))
		}
		require.NoError(t, rows.Err())
		return b.String()
	}
	out := map[string]string{
		"indexes":     text(`SELECT schema_name, table_name, index_name, sql FROM duckdb_indexes() ORDER BY ALL`),
		"constraints": text(`SELECT schema_name, table_name, constraint_text FROM duckdb_constraints() WHERE constraint_type IN ('UNIQUE', 'PRIMARY KEY') ORDER BY ALL`),
		"version":     text(`SELECT value FROM idem.meta WHERE key = 'catalog_version'`),
	}
	rows, err := db.Query(`SELECT schema_name, table_name FROM duckdb_tables() ORDER BY ALL`)
	require.NoError(t, err)
	var names []string
	for rows.Next() {
		var s, n string
		require.NoError(t, rows.Scan(&s, &n))
		names = append(names, strconv.Quote(s)+"."+strconv.Quote(n))
	}
	require.NoError(t, rows.Close())
	require.Contains(t, names, `"idem"."ledger"`)
	for _, n := range names {
		out[n] = text("SELECT * FROM " + n + " ORDER BY ALL")
	}
	return out
}

// TestNewerCatalogRefused: a database whose catalog version is above this
// idem's is refused by every writing and reading command, exit 3, with
// one message, and nothing in it changes: not a row, not a byte.
func TestNewerCatalogRefused(t *testing.T) {
	t.Parallel()
	dir := legacyCopy(t)
	db := filepath.Join(dir, "legacy.duckdb")
	latest, err := catalog.LatestVersion()
	require.NoError(t, err)
	raw, err := sql.Open("duckdb", db)
	require.NoError(t, err)
	_, err = raw.Exec(`INSERT INTO idem.meta VALUES ('catalog_version', ?)`, strconv.Itoa(latest+1))
	require.NoError(t, err)
	_, err = raw.Exec(`CHECKPOINT`)
	require.NoError(t, err)
	require.NoError(t, raw.Close())
	before, sig := captureAll(t, db), fileSig(t, db)
	want := fmt.Sprintf("idem: database %s has catalog version %d; this idem reads up to %d: upgrade idem\n", db, latest+1, latest)

	jobFile := func(name string) string { return filepath.Join(dir, name+".toml") }
	input := filepath.Join(dir, "inputs", "batch-3.jsonl")
	out := filepath.Join(t.TempDir(), "x.csv")
	for _, args := range [][]string{
		// writing
		{"run", jobFile("customer_state"), "--input", input, "--batch-id", "batch-9"},
		{"fence", jobFile("orders")},
		{"erase", jobFile("customer_state"), "--key", "account-1"},
		{"rollback", jobFile("customer_state"), "--to-snapshot", "1"},
		{"expire", jobFile("customer_state"), "--keep-snapshots", "1"},
		{"compact", "--db", db},
		{"backup", "--db", db, "--out", filepath.Join(t.TempDir(), "backup")},
		// reading
		{"export", jobFile("customer_state"), "--out", out},
		{"log", jobFile("customer_state")},
		{"query", "--db", db, "SELECT 1"},
		{"diff", jobFile("customer_state"), "--from", "1", "--to", "2"},
		{"plan", jobFile("customer_state"), "--input", input},
		{"rerun", jobFile("customer_state")},
		{"show", jobFile("customer_state")},
		{"du", jobFile("customer_state")},
	} {
		code, stdout, stderr := clitest.InProcess(t, args...)
		require.Equal(t, report.ExitRefused, code, "idem %v: %s%s", args, stdout, stderr)
		require.Equal(t, want, stderr, "idem %v", args)
	}
	require.Equal(t, before, captureAll(t, db))
	require.Equal(t, sig, fileSig(t, db), "the file's bytes or mtime changed")
	require.NoFileExists(t, db+".wal")
	require.NoFileExists(t, out)
}

// TestMigrationSumRefused: a database whose record of an applied
// migration holds another sha256 than this idem's file of it (migrated by
// another build) is refused by writing and reading commands, exit 3,
// naming the migration and both sha256s, and nothing in it changes.
func TestMigrationSumRefused(t *testing.T) {
	t.Parallel()
	dir := legacyCopy(t)
	db := filepath.Join(dir, "legacy.duckdb")
	jobFile := func(name string) string { return filepath.Join(dir, name+".toml") }
	legacyIdem(t, 0, "fence", jobFile("orders")) // migrates it, recording the sha256s
	ms, err := catalog.Migrations()
	require.NoError(t, err)
	other := strings.Repeat("f", 64)
	raw, err := sql.Open("duckdb", db)
	require.NoError(t, err)
	_, err = raw.Exec(`UPDATE idem.migrations SET sha256 = ? WHERE version = 2`, other)
	require.NoError(t, err)
	_, err = raw.Exec(`CHECKPOINT`)
	require.NoError(t, err)
	require.NoError(t, raw.Close())
	before, sig := captureAll(t, db), fileSig(t, db)
	want := fmt.Sprintf("idem: database %s took migration %s (catalog version 2) with sha256 %s, but this idem's file has sha256 %s: "+
		"it was migrated by another build of idem whose migration differs; nothing was changed. Open it with the idem that migrated it\n",
		db, ms[1].File, other, ms[1].SHA256)
	for _, args := range [][]string{
		{"run", jobFile("customer_state"), "--input", filepath.Join(dir, "inputs", "batch-3.jsonl"), "--batch-id", "batch-9"},
		{"log", jobFile("customer_state")},
		{"query", "--db", db, "SELECT 1"},
	} {
		code, stdout, stderr := clitest.InProcess(t, args...)
		require.Equal(t, report.ExitRefused, code, "idem %v: %s%s", args, stdout, stderr)
		require.Equal(t, want, stderr, "idem %v", args)
	}
	require.Equal(t, before, captureAll(t, db))
	require.Equal(t, sig, fileSig(t, db), "the file's bytes or mtime changed")
}

// TestMigrationKilled kills the migration of an old database (release
// e77bdc9) by SIGKILL at its fault points: before COMMIT the database is
// exactly the old one; after COMMIT (the migration only in the WAL, the
// rebuilt ledger and its constraint included) a read-only command reads it
// without writing and the next writable open replays and checkpoints it. Either way the next command
// finishes the migration once, and the ledger's unique constraint holds.
func TestMigrationKilled(t *testing.T) {
	t.Parallel()
	for _, point := range []string{catalog.FaultMigrateBeforeCommit, catalog.FaultMigrateAfterCommit} {
		t.Run(point, func(t *testing.T) {
			t.Parallel()
			dir := legacyCopy(t)
			db := filepath.Join(dir, "legacy.duckdb")
			sample := filepath.Join(dir, "sample.toml")
			inputB := filepath.Join(dir, "inputs", "occurrences-b.csv")
			old := captureAll(t, db)
			require.Equal(t, "value\n", old["version"])

			r := clitest.RunCLI(t, dir, point, "run", sample, "--input", inputB)
			require.True(t, r.Killed, "not killed at %s: %d %s", point, r.Code, r.Stderr)
			require.Contains(t, r.Stderr, "killing the process at "+point)
			got := captureAll(t, db)
			if point == catalog.FaultMigrateBeforeCommit {
				require.Equal(t, old, got, "a migration killed before COMMIT left a change")
			} else {
				require.FileExists(t, db+".wal")
				require.Equal(t, "value\n"+strconv.Itoa(mustLatest(t))+"\n", got["version"])
				require.Contains(t, got["constraints"], "ledger UNIQUE(job, batch_id)")
				// A reader replays the WAL in memory and writes nothing.
				sig := fileSig(t, db)
				code, stdout, stderr := clitest.InProcess(t, "export", sample, "--out", filepath.Join(t.TempDir(), "s.csv"))
				require.Equal(t, 0, code, stdout+stderr)
				require.Equal(t, sig, fileSig(t, db))
			}

			code, stdout, stderr := clitest.InProcess(t, "run", sample, "--input", inputB)
			require.Equal(t, 0, code, stdout+stderr)
			require.Contains(t, stdout, "skipped")
			require.NoFileExists(t, db+".wal")
			now := captureAll(t, db)
			require.Equal(t, "value\n"+strconv.Itoa(mustLatest(t))+"\n", now["version"])
			require.Contains(t, now["constraints"], "idem ledger UNIQUE(job, batch_id)")
			require.Equal(t, old[`"idem"."ledger"`], now[`"idem"."ledger"`])
			require.Equal(t, old[`"main"."occurrence_sample"`], now[`"main"."occurrence_sample"`])
			raw, err := sql.Open("duckdb", db)
			require.NoError(t, err)
			defer raw.Close()
			_, err = raw.Exec(`INSERT INTO idem.ledger SELECT * FROM idem.ledger LIMIT 1`)
			require.ErrorContains(t, err, "violates unique constraint")
		})
	}
}

func mustLatest(t *testing.T) int {
	t.Helper()
	v, err := catalog.LatestVersion()
	require.NoError(t, err)
	return v
}
