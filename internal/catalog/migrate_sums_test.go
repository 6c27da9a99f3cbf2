package catalog

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/idem-dev/idem/internal/report"
	"github.com/stretchr/testify/require"
)

// embeddedSums is "version|file|sha256" of every embedded migration, read
// from the files themselves.
func embeddedSums(t *testing.T) []string {
	t.Helper()
	entries, err := fs.ReadDir(embedded, "migrations")
	require.NoError(t, err)
	var out []string
	for i, e := range entries {
		data, err := fs.ReadFile(embedded, "migrations/"+e.Name())
		require.NoError(t, err)
		sum := sha256.Sum256(data)
		out = append(out, strconv.Itoa(i+1)+"|"+e.Name()+"|"+hex.EncodeToString(sum[:]))
	}
	return out
}

const readSums = `SELECT version, file, sha256 FROM idem.migrations ORDER BY version`

// TestMigrationSumsRecorded: a new database and one of catalog version 7
// (made by the embedded migrations 0001-0007) record every migration with
// its file's sha256.
func TestMigrationSumsRecorded(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	want := embeddedSums(t)
	require.GreaterOrEqual(t, len(want), sumsVersion)

	fresh := newCatalog(t)
	require.Equal(t, want, rows(t, fresh, readSums))

	old := version7(t, `INSERT INTO idem.jobs (job, target, snapshot) VALUES ('a', 't', 1)`)
	jobs := rows(t, old, `SELECT * FROM idem.jobs`)
	require.NoError(t, Migrate(ctx, old, "v7.duckdb", nil))
	require.Equal(t, want, rows(t, old, readSums))
	require.Equal(t, jobs, rows(t, old, `SELECT * FROM idem.jobs`))
	require.NoError(t, CheckVersion(ctx, old, "v7.duckdb"))
}

// TestMigrationSumRefused: a database that recorded another sha256 for a
// migration than this idem's file has is refused (exit 3), naming the
// migration and both sha256s, on a writable open (with or without a
// migration pending) and a read-only one, and nothing is changed.
func TestMigrationSumRefused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ms, err := Migrations()
	require.NoError(t, err)
	other := strings.Repeat("0", 64)
	cases := []struct {
		name string
		list []Migration
	}{
		{name: "up to date", list: ms},
		{name: "a migration pending", list: append(append([]Migration{}, ms...),
			Migration{Version: len(ms) + 1, File: "9999_next.sql", SQL: `CREATE TABLE idem.next (x INT)`, SHA256: other})},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			db := newCatalog(t)
			exec(t, db, `UPDATE idem.migrations SET sha256 = '`+other+`' WHERE version = 3`)
			before := snapshotAll(t, db)
			err := migrate(ctx, db, "db.duckdb", c.list, nil)
			var se *SumError
			require.ErrorAs(t, err, &se)
			require.ErrorIs(t, err, report.ErrRefused)
			require.Equal(t, 3, report.ExitCode(err))
			require.EqualError(t, err, "database db.duckdb took migration 0003_erasure_subject.sql (catalog version 3) with sha256 "+other+
				", but this idem's file has sha256 "+ms[2].SHA256+": it was migrated by another build of idem whose migration differs; "+
				"nothing was changed. Open it with the idem that migrated it")
			require.Equal(t, before, snapshotAll(t, db), "nothing changed")
			require.Equal(t, err, CheckVersion(ctx, db, "db.duckdb"))
		})
	}
}

// positionalInsert is an INSERT into one of idem's tables that does not
// name its columns: it would write by position, tied to the order a
// migration left the columns in.
var positionalInsert = regexp.MustCompile("(?i)INSERT\\s+INTO\\s+idem\\.\"?[a-z_0-9]+\"?\\s+(VALUES|SELECT|\\()?")

// TestInsertsNameColumns: every INSERT into idem.* in idem's code and
// migrations names its columns (or inserts BY NAME).
func TestInsertsNameColumns(t *testing.T) {
	t.Parallel()
	var found []string
	root := filepath.Join("..", "..")
	for _, dir := range []string{"internal", "runner", filepath.Join("cmd", "idem")} {
		err := filepath.WalkDir(filepath.Join(root, dir), func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			if !(strings.HasSuffix(path, ".go") || strings.HasSuffix(path, ".sql")) || strings.HasSuffix(path, "_test.go") {
				return nil
			}
			data, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			for _, m := range positionalInsert.FindAllStringSubmatchIndex(string(data), -1) {
				text := string(data[m[0]:m[1]])
				if m[2] >= 0 && string(data[m[2]:m[3]]) == "(" || strings.HasPrefix(strings.ToUpper(string(data[m[1]:])), "BY NAME") {
					continue
				}
				line := strings.Count(string(data[:m[0]]), "\n") + 1
				found = append(found, path+":"+strconv.Itoa(line)+": "+text)
			}
			return nil
		})
		if !os.IsNotExist(err) {
			require.NoError(t, err)
		}
	}
	require.Empty(t, found, "INSERTs into idem.* that do not name their columns")
}
