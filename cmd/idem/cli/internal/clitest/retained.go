package clitest

import (
	"database/sql"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// StoreFiles lists every file under the retained-input store, relative to it.
func StoreFiles(t *testing.T, db string) []string {
	t.Helper()
	dir := db + ".inputs"
	out := []string{}
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if os.IsNotExist(err) {
			return filepath.SkipAll
		}
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		out = append(out, rel)
		return err
	})
	require.NoError(t, err)
	slices.Sort(out)
	return out
}

// RequireStoreIsCommitted requires the retained-input store to hold exactly
// one file per committed idem.inputs row and nothing else (no temporary file,
// no copy of a failed run, no original of an erased input).
func RequireStoreIsCommitted(t *testing.T, db string) {
	t.Helper()
	want := []string{}
	for _, s := range committedInputs(t, db) {
		want = append(want, filepath.Join(s[:2], s))
	}
	slices.Sort(want)
	require.Equal(t, want, StoreFiles(t, db), "the retained-input store holds exactly the committed inputs")
}

// committedInputs reads idem.inputs through DuckDB alone: run.Open
// would sweep the store first and hide what the command under test left.
func committedInputs(t *testing.T, db string) []string {
	t.Helper()
	conn, err := sql.Open("duckdb", "")
	require.NoError(t, err)
	defer conn.Close()
	conn.SetMaxOpenConns(1)
	_, err = conn.Exec("ATTACH '" + strings.ReplaceAll(db, "'", "''") + "' AS inspected (READ_ONLY)")
	require.NoError(t, err)
	rows, err := conn.Query(`SELECT DISTINCT sha256 FROM inspected.idem.inputs ORDER BY 1`)
	require.NoError(t, err)
	defer rows.Close()
	out := []string{}
	for rows.Next() {
		var s string
		require.NoError(t, rows.Scan(&s))
		out = append(out, s)
	}
	require.NoError(t, rows.Err())
	return out
}
