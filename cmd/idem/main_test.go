package main

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"syscall"
	"testing"
	"time"

	_ "github.com/duckdb/duckdb-go/v2"
	"github.com/stretchr/testify/require"
)

// TestMain lets a test run this test binary as the idem CLI in a child
// process (IDEM_TEST_AS_CLI=1 or IDEM_TEST_AS_IDEM=1), through the same
// realMain() as main, signal handling included, so crash tests can SIGKILL a
// real process at an IDEM_FAULT point without building the binary.
func TestMain(m *testing.M) {
	if os.Getenv("IDEM_TEST_AS_CLI") == "1" || os.Getenv(processEnv) == "1" {
		os.Exit(realMain())
	}
	// These tests start several hundred idem processes (kill tests, every
	// example, every command's JSON). On a quiet 2-core machine they take
	// about 6 minutes, close to go test's default per-package timeout of
	// 10; a loaded machine can pass it. When the timeout is that default,
	// allow 25 minutes; an explicit -timeout is kept.
	flag.Parse()
	if f := flag.Lookup("test.timeout"); f != nil && f.Value.String() == (10*time.Minute).String() {
		_ = f.Value.Set("25m")
	}
	// Most of a test's time is spent waiting for the idem processes it
	// starts, so go test's default of GOMAXPROCS parallel tests leaves
	// the machine half idle (go test itself kills a package that runs past
	// its timeout plus a minute, whatever TestMain sets). Run three times
	// as many parallel tests unless -parallel was given.
	if f := flag.Lookup("test.parallel"); f != nil && f.Value.String() == strconv.Itoa(runtime.GOMAXPROCS(0)) {
		_ = f.Value.Set(strconv.Itoa(3 * runtime.GOMAXPROCS(0)))
	}
	os.Exit(m.Run())
}

// cliResult is a finished child process: its exit code (-1 when killed by
// a signal), whether SIGKILL ended it, and its output.
type cliResult struct {
	code           int
	killed         bool
	stdout, stderr string
}

// runCLI runs idem in a child process with the given fault point ("" for
// none) and working directory.
func runCLI(t *testing.T, dir, fault string, args ...string) cliResult {
	t.Helper()
	exe, err := os.Executable()
	require.NoError(t, err)
	cmd := exec.Command(exe, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "IDEM_TEST_AS_CLI=1", "IDEM_FAULT="+fault)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Run()
	res := cliResult{stdout: stdout.String(), stderr: stderr.String()}
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		res.code = ee.ExitCode()
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL {
			res.killed = true
		}
	default:
		require.NoError(t, err)
	}
	return res
}

// cli runs the idem CLI in-process and returns its exit code, stdout and
// stderr. Every in-process helper of these tests goes through it.
func cli(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := Main(context.Background(), args, &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

// queryInts opens a database file read-only and returns one int64 per row of
// a one-column query.
func queryInts(t *testing.T, dbPath, q string, args ...any) []int64 {
	t.Helper()
	return queryColumn[int64](t, dbPath, q, args...)
}

// queryStrs is queryInts for a text column.
func queryStrs(t *testing.T, dbPath, q string, args ...any) []string {
	t.Helper()
	return queryColumn[string](t, dbPath, q, args...)
}

func queryColumn[T any](t *testing.T, dbPath, q string, args ...any) []T {
	t.Helper()
	db, err := sql.Open("duckdb", dbPath+"?access_mode=read_only")
	require.NoError(t, err)
	defer db.Close()
	rows, err := db.Query(q, args...)
	require.NoError(t, err)
	defer rows.Close()
	out := []T{}
	for rows.Next() {
		var v T
		require.NoError(t, rows.Scan(&v))
		out = append(out, v)
	}
	require.NoError(t, rows.Err())
	return out
}

func writeFile(t testing.TB, path, text string) {
	t.Helper()
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
	require.NoError(t, os.WriteFile(path, []byte(text), 0o644))
}
