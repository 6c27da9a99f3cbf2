package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idem-dev/idem/internal/run"
	"github.com/idem-dev/idem/pipelines"
)

// seedPath is the seed whose program the jsonl case runs; it lives beside
// the specification, outside the repository.
const seedPath = "/work/shared/seeds/incremental-idempotent-pipelines.txt"

// TestSeedProgramVerbatim: the embedded program's database() and apply()
// are the seed's text, byte for byte.
func TestSeedProgramVerbatim(t *testing.T) {
	t.Parallel()
	seed, err := os.ReadFile(seedPath)
	if err != nil {
		t.Skipf("the seed is not on this machine: %v", err)
	}
	for _, fn := range []string{"def database():", "def apply("} {
		block := pythonBlock(t, string(seed), fn)
		require.Contains(t, seedApplyPy, block, "%s differs from the seed's", fn)
	}
}

// pythonBlock is the top-level Python definition starting with first, up to
// the next line that is neither blank nor indented.
func pythonBlock(t *testing.T, text, first string) string {
	i := strings.Index(text, "\n"+first)
	require.GreaterOrEqual(t, i, 0, "no %q", first)
	lines := strings.SplitAfter(text[i+1:], "\n")
	end := 1
	for end < len(lines) && (strings.HasPrefix(lines[end], " ") || strings.TrimSpace(lines[end]) == "") {
		end++
	}
	return strings.TrimRight(strings.Join(lines[:end], ""), "\n")
}

// TestSeedProgramAgreesWithIdem: on the case's generated batch, idem's
// target and the seed program's SQLite state give the same digest, so the
// case's final check compares like with like (and fails when they differ).
func TestSeedProgramAgreesWithIdem(t *testing.T) {
	t.Parallel()
	python, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("no python3")
	}
	ctx := context.Background()
	dir := t.TempDir()
	input := filepath.Join(dir, "changes.jsonl")
	require.NoError(t, writeJSONL(input, 2000))
	program := filepath.Join(dir, "seed_apply.py")
	require.NoError(t, writeFile(program, seedApplyPy))
	jobPath := filepath.Join(dir, "job.toml")
	require.NoError(t, writeFile(jobPath, jsonlJob))

	sqlitePath := filepath.Join(dir, "seed.sqlite")
	out, err := exec.CommandContext(ctx, python, program, "apply", input, sqlitePath).CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.Equal(t, "committed 2000", strings.TrimSpace(string(out)))
	out, err = exec.CommandContext(ctx, python, program, "digest", sqlitePath).CombinedOutput()
	require.NoError(t, err, "%s", out)
	seed := strings.TrimSpace(string(out))
	require.True(t, strings.HasPrefix(seed, "2000 rows, sha256 "), seed)

	dbPath := filepath.Join(dir, "idem.duckdb")
	j, err := run.LoadJob(jobPath, pipelines.FS)
	require.NoError(t, err)
	db, err := run.Open(ctx, dbPath, run.OpenOptions{})
	require.NoError(t, err)
	_, err = db.Run(ctx, j, run.RunOptions{Input: input, BatchID: "B1"})
	require.NoError(t, err)
	require.NoError(t, db.Close())

	ro, err := openRO(dbPath)
	require.NoError(t, err)
	defer ro.Close()
	var got string
	require.NoError(t, ro.QueryRowContext(ctx, stateDigestSQL).Scan(&got))
	require.Equal(t, seed, got)

	// A state that differs by one value gives another digest.
	out, err = exec.CommandContext(ctx, python, "-c", `import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
db.execute("UPDATE state SET value = value + 1 WHERE id = (SELECT min(id) FROM state WHERE deleted = 0)")
db.commit()`, sqlitePath).CombinedOutput()
	require.NoError(t, err, "%s", out)
	out, err = exec.CommandContext(ctx, python, program, "digest", sqlitePath).CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.NotEqual(t, got, strings.TrimSpace(string(out)))
}
