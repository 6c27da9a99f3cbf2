package clitest

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idem-dev/idem/internal/export"
)

// ReadManifest reads the manifest of a partitioned export in dir and
// requires that every entry's file exists with the recorded size and
// sha256, that no two entries share a path and that the folder holds no
// file the manifest does not list.
func ReadManifest(t *testing.T, dir string) export.Manifest {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, export.ManifestName))
	require.NoError(t, err)
	var m export.Manifest
	require.NoError(t, json.Unmarshal(data, &m))
	listed := map[string]bool{export.ManifestName: true}
	var rows int64
	for _, f := range m.Files {
		require.False(t, listed[f.Path], "two manifest entries name %s", f.Path)
		listed[f.Path] = true
		data, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(f.Path)))
		require.NoError(t, err, "manifest entry %s", f.Path)
		sum := sha256.Sum256(data)
		require.Equal(t, f.SHA256, hex.EncodeToString(sum[:]), "manifest sha256 of %s is not the file's", f.Path)
		require.Equal(t, f.Bytes, int64(len(data)), "manifest bytes of %s", f.Path)
		rows += f.Rows
	}
	require.Equal(t, m.Rows, rows)
	var onDisk []string
	require.NoError(t, filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		onDisk = append(onDisk, filepath.ToSlash(rel))
		return err
	}))
	for _, p := range onDisk {
		require.True(t, listed[p], "%s is in the export folder but not in its manifest", p)
	}
	require.Len(t, onDisk, len(m.Files)+1, "one file per manifest entry, plus the manifest")
	return m
}

// SQLQuote is a SQL string literal.
func SQLQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// ListDir is the sorted names in dir.
func ListDir(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	sort.Strings(names)
	return names
}
