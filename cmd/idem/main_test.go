package main

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	_ "github.com/duckdb/duckdb-go/v2" // the "duckdb" driver of inspect
	"github.com/stretchr/testify/require"
)

// TestMain lets a test run this test binary as the idem CLI in a child
// process (IDEM_TEST_AS_CLI=1 or IDEM_TEST_AS_IDEM=1), through the same
// realMain() as main, signal handling included, so crash tests can SIGKILL a
// real process at an IDEM_FAULT point without building another binary:
// every child process of these tests is this binary, built once by go test.
//
// The package runs with go test's defaults: GOMAXPROCS parallel tests (the
// idem processes and databases of the tests use one DuckDB thread each, see
// testThreads, so more would only queue on the CPU) and the -timeout given.
func TestMain(m *testing.M) {
	if os.Getenv("IDEM_TEST_AS_CLI") == "1" || os.Getenv(processEnv) == "1" {
		os.Exit(realMain())
	}
	dir, err := os.MkdirTemp("", "idem-test-fixtures-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fixtureRoot = dir
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// fixtureRoot holds the fixtures built once per run of the package
// (fixtureDir); TestMain makes it and removes it at the end.
var fixtureRoot string

// fixtureDir is a new folder for a fixture that outlives the test that
// builds it: tests copy it (copyDir) rather than build their own.
func fixtureDir(t testing.TB, name string) string {
	t.Helper()
	dir, err := os.MkdirTemp(fixtureRoot, name+"-")
	require.NoError(t, err)
	return dir
}

// longTests reports whether IDEM_LONG=1 asks for the long versions of the
// randomized tests: random-delay kills, long property and stream runs. The
// default run keeps a short version of each, and every deterministic fault
// point (docs/reliability.md).
func longTests() bool { return os.Getenv("IDEM_LONG") == "1" }

// longOr returns short, or long when IDEM_LONG=1.
func longOr(short, long int) int {
	if longTests() {
		return long
	}
	return short
}

// once is a value computed once by the first test that needs it, with that
// test's t, and shared by the tests after it: a fixture, a measurement.
// When the first computation failed, every later caller fails too.
type once[T any] struct {
	once sync.Once
	v    T
	ok   bool
}

func (o *once[T]) get(t *testing.T, f func(t *testing.T) T) T {
	t.Helper()
	o.once.Do(func() {
		o.v = f(t)
		o.ok = true
	})
	if !o.ok {
		t.Fatal("the shared value failed to build in another test")
	}
	return o.v
}

// testThreads is the DuckDB thread count of the job files and databases
// these tests make ([duckdb] threads, --threads): one, since the tests run
// side by side and each DuckDB would start a thread per core. The tests of
// thread-count independence (TestQueryCSVIsByteIdenticalAcrossThreads,
// TestRulesSameOutcomesAnyThreads, and internal/ops' TestExportIsByteStable)
// set their own.
const testThreads = "1"

// duckdbSection is the [duckdb] table the tests' job files end with.
const duckdbSection = "[duckdb]\nthreads = " + testThreads + "\n"

// cliResult is a finished child process or in-process call: its exit code
// (-1 when killed by a signal), whether SIGKILL ended it, and its output.
type cliResult struct {
	code           int
	killed         bool
	stdout, stderr string
}

var testExe = sync.OnceValues(os.Executable)

// idemCommand is an exec.Cmd running this test binary as idem in folder
// dir (the test's folder when ""), with IDEM_FAULT=fault and env added.
func idemCommand(t testing.TB, dir, fault string, env []string, args ...string) *exec.Cmd {
	t.Helper()
	exe, err := testExe()
	require.NoError(t, err)
	cmd := exec.Command(exe, args...)
	cmd.Dir = dir
	cmd.Env = append(append(os.Environ(), "IDEM_TEST_AS_CLI=1", "IDEM_FAULT="+fault), env...)
	return cmd
}

// runCLI runs idem in a child process with the given fault point ("" for
// none) and working directory.
func runCLI(t *testing.T, dir, fault string, args ...string) cliResult {
	t.Helper()
	return killCLI(t, dir, fault, 0, args...)
}

// killCLI runs idem in a child process in folder work, with IDEM_FAULT set
// to fault, SIGKILLed after delay when delay is above zero.
func killCLI(t *testing.T, work, fault string, delay time.Duration, args ...string) cliResult {
	t.Helper()
	return runIdemCmd(t, work, fault, delay, nil, args...)
}

// runIdemCmd runs idem with args in folder work, with IDEM_FAULT=fault and
// the extra environment env; a delay above zero SIGKILLs it after it.
func runIdemCmd(t *testing.T, work, fault string, delay time.Duration, env []string, args ...string) cliResult {
	t.Helper()
	cmd := idemCommand(t, work, fault, env, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	require.NoError(t, cmd.Start())
	if delay > 0 {
		timer := time.AfterFunc(delay, func() { _ = cmd.Process.Signal(syscall.SIGKILL) })
		defer timer.Stop()
	}
	err := cmd.Wait()
	r := cliResult{stdout: stdout.String(), stderr: stderr.String()}
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		require.NoError(t, err, "run idem")
	}
	ws := cmd.ProcessState.Sys().(syscall.WaitStatus)
	if ws.Signaled() {
		require.Equal(t, syscall.SIGKILL, ws.Signal())
		r.killed, r.code = true, -1
	} else {
		r.code = ws.ExitStatus()
	}
	return r
}

// blockedIdem is idem in a child process held at a fault point by
// IDEM_FAULT=block:<point> until release closes its stdin.
type blockedIdem struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stdout bytes.Buffer
	mu     sync.Mutex
	stderr strings.Builder
	done   chan struct{} // closed once the process exited
}

// startBlocked starts idem with args in folder dir and returns once it
// reports that it is blocked at point (failing the test if it exits
// first). The process holds whatever it holds there until release.
func startBlocked(t *testing.T, dir, point string, args ...string) *blockedIdem {
	t.Helper()
	b := &blockedIdem{cmd: idemCommand(t, dir, "block:"+point, nil, args...), done: make(chan struct{})}
	var err error
	b.stdin, err = b.cmd.StdinPipe()
	require.NoError(t, err)
	b.cmd.Stdout = &b.stdout
	errPipe, err := b.cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, b.cmd.Start())
	blocked := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(errPipe)
		once := sync.OnceFunc(func() { close(blocked) })
		for sc.Scan() {
			b.mu.Lock()
			b.stderr.WriteString(sc.Text() + "\n")
			b.mu.Unlock()
			if strings.Contains(sc.Text(), "blocked at "+point) {
				once()
			}
		}
		_ = b.cmd.Wait()
		close(b.done)
	}()
	t.Cleanup(func() {
		select {
		case <-b.done:
		default:
			_ = b.cmd.Process.Kill()
			<-b.done
		}
	})
	select {
	case <-blocked:
	case <-b.done:
		t.Fatalf("idem %v exited (%v) before it blocked at %s: %s", args, b.cmd.ProcessState, point, b.errText())
	}
	return b
}

func (b *blockedIdem) errText() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.stderr.String()
}

// release lets the blocked process go on.
func (b *blockedIdem) release() { _ = b.stdin.Close() }

// wait releases the process, waits for it to exit and returns its exit
// code, stdout and stderr.
func (b *blockedIdem) wait(t *testing.T) (int, string, string) {
	t.Helper()
	b.release()
	select {
	case <-b.done:
	case <-time.After(5 * time.Minute):
		t.Fatalf("idem %v still running 5 minutes after its release: %s", b.cmd.Args[1:], b.errText())
	}
	return b.cmd.ProcessState.ExitCode(), b.stdout.String(), b.errText()
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
	out := []T{}
	inspect(t, dbPath, func(conn *sql.Conn) {
		rows, err := conn.QueryContext(context.Background(), q, args...)
		require.NoError(t, err)
		defer rows.Close()
		for rows.Next() {
			var v T
			require.NoError(t, rows.Scan(&v))
			out = append(out, v)
		}
		require.NoError(t, rows.Err())
	})
	return out
}

func writeFile(t testing.TB, path, text string) {
	t.Helper()
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
	require.NoError(t, os.WriteFile(path, []byte(text), 0o644))
}
