package clitest

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
	"github.com/idem-dev/idem/internal/testflags"
	"github.com/stretchr/testify/require"
)

// CLI is the idem command line under test. The kit cannot import package
// cli (whose own tests use the kit), so each package of CLI tests passes
// it to Main from its TestMain.
type CLI struct {
	// Main runs the CLI in-process (cli.Main).
	Main func(ctx context.Context, args []string, stdout, stderr io.Writer) int
	// Run is the whole process, signal handling included (cli.Run).
	Run func() int
	// HasFlag reports whether a command takes a flag (cli.CommandHasFlag).
	HasFlag func(args []string, name string) bool
}

// processEnv=1 makes a test binary act as the idem binary: Main calls
// CLI.Run instead of the tests, so a test can run, block and SIGKILL idem
// as a child process without building another binary (idemCommand).
const processEnv = "IDEM_TEST_AS_CLI"

// under is the CLI of this test binary, set by Main.
var under CLI

// fixtureRoot holds the fixtures built once per run of the package
// (FixtureDir); Main makes it and removes it at the end.
var fixtureRoot string

// Main is the TestMain of a package of CLI tests. With processEnv=1 the
// binary is idem: every child process of the tests is the test binary
// itself, built once by go test, running the same Run as cmd/idem. Else it
// runs the tests with a folder for the fixtures they share and removes it.
//
// A package runs half as many tests at once as GOMAXPROCS unless -parallel
// is given (testflags.DefaultParallel): each test drives one DuckDB with
// one thread (TestThreads) and go test ./... runs GOMAXPROCS packages at
// once. The -timeout is go test's.
func Main(m *testing.M, c CLI) {
	mainWith(m, c, testflags.DefaultParallel)
}

// MainWaiting is Main for a package whose tests mostly wait (on a broker,
// a follower's batch interval, a child process): it runs as many tests at
// once as GOMAXPROCS (testflags.WaitingParallel).
func MainWaiting(m *testing.M, c CLI) {
	mainWith(m, c, testflags.WaitingParallel)
}

func mainWith(m *testing.M, c CLI, parallel func() int) {
	if os.Getenv(processEnv) == "1" {
		os.Exit(c.Run())
	}
	under = c
	parallel()
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

// RepoRoot is the absolute path of the repository: the nearest folder
// above the test's working directory (its package) with a go.mod.
func RepoRoot(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	require.NoError(t, err)
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		require.NotEqual(t, dir, parent, "no go.mod above the test's folder")
		dir = parent
	}
}

// FixtureDir is a new folder for a fixture that outlives the test that
// builds it: tests copy it (CopyDir) rather than build their own.
func FixtureDir(t testing.TB, name string) string {
	t.Helper()
	dir, err := os.MkdirTemp(fixtureRoot, name+"-")
	require.NoError(t, err)
	return dir
}

// LongTests reports whether IDEM_LONG=1 asks for the long versions of the
// randomized tests: random-delay kills, long property and stream runs. The
// default run keeps a short version of each, and every deterministic fault
// point (docs/reliability.md).
func LongTests() bool { return os.Getenv("IDEM_LONG") == "1" }

// LongOr returns short, or long when IDEM_LONG=1.
func LongOr(short, long int) int {
	if LongTests() {
		return long
	}
	return short
}

// Once is a value computed once by the first test that needs it, with that
// test's t, and shared by the tests after it: a fixture, a measurement.
// When the first computation failed, every later caller fails too.
type Once[T any] struct {
	once sync.Once
	v    T
	ok   bool
}

// Get returns the value, computing it with f and the calling test's t
// the first time.
func (o *Once[T]) Get(t *testing.T, f func(t *testing.T) T) T {
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

// TestThreads is the DuckDB thread count of the job files and databases
// these tests make ([duckdb] threads, --threads): one, since the tests run
// side by side and each DuckDB would start a thread per core. The tests of
// thread-count independence (TestQueryCSVIsByteIdenticalAcrossThreads,
// TestRulesSameOutcomesAnyThreads, and internal/history's TestExportIsByteStable)
// set their own.
const TestThreads = "1"

// DuckdbSection is the [duckdb] table the tests' job files end with.
const DuckdbSection = "[duckdb]\nthreads = " + TestThreads + "\n"

// CLIResult is a finished child process or in-process call: its exit code
// (-1 when killed by a signal), whether SIGKILL ended it, and its output.
type CLIResult struct {
	Code           int
	Killed         bool
	Stdout, Stderr string
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

// RunCLI runs idem in a child process with the given fault point ("" for
// none) and working directory.
func RunCLI(t *testing.T, dir, fault string, args ...string) CLIResult {
	t.Helper()
	return KillCLI(t, dir, fault, 0, args...)
}

// KillCLI runs idem in a child process in folder work, with IDEM_FAULT set
// to fault, SIGKILLed after delay when delay is above zero.
func KillCLI(t *testing.T, work, fault string, delay time.Duration, args ...string) CLIResult {
	t.Helper()
	return RunIdemCmd(t, work, fault, delay, nil, args...)
}

// RunIdemCmd runs idem with args in folder work, with IDEM_FAULT=fault and
// the extra environment env; a delay above zero SIGKILLs it after it.
func RunIdemCmd(t *testing.T, work, fault string, delay time.Duration, env []string, args ...string) CLIResult {
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
	r := CLIResult{Stdout: stdout.String(), Stderr: stderr.String()}
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		require.NoError(t, err, "run idem")
	}
	ws := cmd.ProcessState.Sys().(syscall.WaitStatus)
	if ws.Signaled() {
		require.Equal(t, syscall.SIGKILL, ws.Signal())
		r.Killed, r.Code = true, -1
	} else {
		r.Code = ws.ExitStatus()
	}
	return r
}

// BlockedIdem is idem in a child process held at a fault point by
// IDEM_FAULT=block:<point> until release closes its stdin.
type BlockedIdem struct {
	Cmd    *exec.Cmd
	stdin  io.WriteCloser
	stdout bytes.Buffer
	mu     sync.Mutex
	stderr strings.Builder
	Done   chan struct{} // closed once the process exited
}

// ErrText is the process's stderr so far.
func (b *BlockedIdem) ErrText() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.stderr.String()
}

// release lets the blocked process go on.
func (b *BlockedIdem) release() { _ = b.stdin.Close() }

// Wait releases the process, waits for it to exit and returns its exit
// code, stdout and stderr.
func (b *BlockedIdem) Wait(t *testing.T) (int, string, string) {
	t.Helper()
	b.release()
	select {
	case <-b.Done:
	case <-time.After(5 * time.Minute):
		t.Fatalf("idem %v still running 5 minutes after its release: %s", b.Cmd.Args[1:], b.ErrText())
	}
	return b.Cmd.ProcessState.ExitCode(), b.stdout.String(), b.ErrText()
}

// StartBlocked starts idem with args in folder dir and returns once it
// reports that it is blocked at point (failing the test if it exits
// first). The process holds whatever it holds there until release.
func StartBlocked(t *testing.T, dir, point string, args ...string) *BlockedIdem {
	t.Helper()
	b := &BlockedIdem{Cmd: idemCommand(t, dir, "block:"+point, nil, args...), Done: make(chan struct{})}
	var err error
	b.stdin, err = b.Cmd.StdinPipe()
	require.NoError(t, err)
	b.Cmd.Stdout = &b.stdout
	errPipe, err := b.Cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, b.Cmd.Start())
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
		_ = b.Cmd.Wait()
		close(b.Done)
	}()
	t.Cleanup(func() {
		select {
		case <-b.Done:
		default:
			_ = b.Cmd.Process.Kill()
			<-b.Done
		}
	})
	select {
	case <-blocked:
	case <-b.Done:
		t.Fatalf("idem %v exited (%v) before it blocked at %s: %s", args, b.Cmd.ProcessState, point, b.ErrText())
	}
	return b
}

// InProcess runs the idem CLI in-process and returns its exit code, stdout and
// stderr. Every in-process helper of these tests goes through it.
func InProcess(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := under.Main(context.Background(), args, &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

// QueryInts opens a database file read-only and returns one int64 per row of
// a one-column query.
func QueryInts(t *testing.T, dbPath, q string, args ...any) []int64 {
	t.Helper()
	return queryColumn[int64](t, dbPath, q, args...)
}

// QueryStrs is QueryInts for a text column.
func QueryStrs(t *testing.T, dbPath, q string, args ...any) []string {
	t.Helper()
	return queryColumn[string](t, dbPath, q, args...)
}

func queryColumn[T any](t *testing.T, dbPath, q string, args ...any) []T {
	t.Helper()
	out := []T{}
	Inspect(t, dbPath, func(conn *sql.Conn) {
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

// WriteFile writes text to path, making its folder, requiring success.
func WriteFile(t testing.TB, path, text string) {
	t.Helper()
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
	require.NoError(t, os.WriteFile(path, []byte(text), 0o644))
}
