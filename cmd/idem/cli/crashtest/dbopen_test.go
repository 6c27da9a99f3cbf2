package crashtest

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/idem-dev/idem/internal/report"
	"github.com/idem-dev/idem/internal/run"

	"github.com/idem-dev/idem/cmd/idem/cli/internal/clitest"
	"github.com/stretchr/testify/require"
)

// dbOpenRounds is how many times the concurrent-creation test and the
// random creation kills repeat: short, or IDEM_DBOPEN_ROUNDS=N (and
// IDEM_DBOPEN_PROCS=N starts N concurrent first runs instead of 4).
func dbOpenRounds(t *testing.T, short int) int {
	if s := os.Getenv("IDEM_DBOPEN_ROUNDS"); s != "" {
		n, err := strconv.Atoi(s)
		require.NoError(t, err)
		return n
	}
	return short
}

// leftovers lists what is beside the database besides the database itself
// and its retained inputs.
func leftovers(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	var out []string
	for _, e := range entries {
		if n := e.Name(); strings.Contains(n, ".creating-") || strings.HasSuffix(n, ".wal") {
			out = append(out, n)
		}
	}
	return out
}

// Several processes starting the first run on the same new database at
// Once: each commits or exits 4 (with --wait each commits), the database
// is never left as a 0-byte file, and it holds one applied batch. One
// round without --wait and one with it; IDEM_LONG=1: ten of each.
func TestConcurrentFirstRuns(t *testing.T) {
	t.Parallel()
	procs := 4
	if s := os.Getenv("IDEM_DBOPEN_PROCS"); s != "" {
		var err error
		procs, err = strconv.Atoi(s)
		require.NoError(t, err)
	}
	for _, wait := range []bool{false, true} {
		for round := range dbOpenRounds(t, clitest.LongOr(1, 10)) {
			j := clitest.NewGuardJob(t)
			var ps []*clitest.IdemProcess
			for range procs {
				args := []string{"run", j.File, "--json"}
				if wait {
					args = append(args, "--wait", "60s")
				}
				ps = append(ps, clitest.StartIdem(t, nil, args...))
			}
			decisions := map[string]int{}
			for _, p := range ps {
				code := p.Wait(t, 120*time.Second)
				if code == report.ExitLocked && !wait {
					require.Contains(t, p.Stderr.String(), "is held by another writer")
					continue
				}
				require.Equal(t, 0, code, "wait=%v round %d: stderr: %s", wait, round, p.Stderr.String())
				var res run.Result
				require.NoError(t, json.Unmarshal(p.Stdout.Bytes(), &res), p.Stdout.String())
				decisions[res.Decision]++
			}
			require.Equal(t, 1, decisions[report.DecisionApplied], "wait=%v round %d: decisions %v", wait, round, decisions)
			if wait {
				require.Equal(t, procs-1, decisions[report.DecisionAlreadyCommitted], "decisions %v", decisions)
			}
			st, err := os.Stat(j.DB)
			require.NoError(t, err)
			require.Positive(t, st.Size(), "a 0-byte database was left")
			require.Empty(t, leftovers(t, j.Dir))
			require.Equal(t, report.DecisionAlreadyCommitted, j.Apply().Decision)
			snap, _, _ := j.State()
			require.Equal(t, int64(1), snap)
		}
	}
}

// A first run killed while it creates the database leaves no database or
// a valid one, and the next run commits and removes what the killed one
// left. The kills land inside the creation by the fault points of Open:
// with the half-built <db>.creating-* file open in DuckDB, complete but not
// linked, and linked but not yet removed (each leaves that file behind,
// which the next run sweeps). Then one kill at a random moment around the
// creation window of a clean first run (IDEM_LONG=1: 20; IDEM_DBOPEN_ROUNDS=N).
func TestCreationKilled(t *testing.T) {
	t.Parallel()
	type outcome struct{ creating, database bool }
	kill := func(t *testing.T, fault string, delay time.Duration) outcome {
		j := clitest.NewGuardJob(t)
		var r clitest.CLIResult
		if fault != "" {
			r = clitest.KillCLI(t, j.Dir, fault, 0, "run", j.File)
			require.True(t, r.Killed, "IDEM_FAULT=%s did not kill: %d %s", fault, r.Code, r.Stderr)
			require.Contains(t, r.Stderr, "killing the process at "+fault)
		} else {
			r = clitest.KillCLI(t, j.Dir, "", delay, "run", j.File)
			if !r.Killed {
				require.Equal(t, 0, r.Code, r.Stderr)
			}
		}
		var o outcome
		o.creating = len(leftovers(t, j.Dir)) > 0
		if st, err := os.Stat(j.DB); err == nil {
			require.Positive(t, st.Size(), "a killed creation left a 0-byte database")
			o.database = true
		}
		res := j.Apply()
		require.Contains(t, []string{report.DecisionApplied, report.DecisionAlreadyCommitted}, res.Decision)
		require.Empty(t, leftovers(t, j.Dir), "the next run did not sweep what the killed one left")
		snap, _, _ := j.State()
		require.Equal(t, int64(1), snap)
		return o
	}
	for _, tc := range []struct {
		point string
		want  outcome
	}{
		{run.FaultCreateBuilding, outcome{creating: true}},
		{run.FaultCreateBuilt, outcome{creating: true}},
		{run.FaultCreateLinked, outcome{creating: true, database: true}},
	} {
		t.Run(tc.point, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tc.want, kill(t, tc.point, 0), "what the kill at %s left", tc.point)
		})
	}

	t.Run("random", func(t *testing.T) {
		t.Parallel()
		// A clean first run shows when creation starts (the .creating- file
		// appears) and ends (the database appears): the kills fall around
		// that window, from a bit before it starts to a bit after it ends.
		j := clitest.NewGuardJob(t)
		p := clitest.StartIdem(t, nil, "run", j.File)
		var start, end time.Duration
		for !p.Exited() && end == 0 {
			if start == 0 && len(leftovers(t, j.Dir)) > 0 {
				start = time.Since(p.Started)
			}
			if _, err := os.Stat(j.DB); err == nil {
				end = time.Since(p.Started)
			}
			time.Sleep(200 * time.Microsecond)
		}
		require.Equal(t, 0, p.Wait(t, time.Minute), p.Stderr.String())
		require.NotZero(t, end, "the database never appeared")
		lo, hi := start*8/10, end*12/10
		outcomes := map[outcome]int{}
		for range dbOpenRounds(t, clitest.LongOr(1, 20)) {
			outcomes[kill(t, "", lo+time.Duration(rand.Int64N(int64(hi-lo)+1)))]++
		}
		t.Logf("clean creation from %v to %v after start; after the kills (creating file, database): %v", start, end, outcomes)
	})
}

// A 0-byte file where the database should be (left by an older idem or a
// kill while DuckDB created it) is replaced by a new database when no
// process holds it, and gives exit 4 when one does.
func TestEmptyDatabaseFile(t *testing.T) {
	t.Parallel()
	j := clitest.NewGuardJob(t)
	require.NoError(t, os.WriteFile(j.DB, nil, 0o644))
	f, err := os.OpenFile(j.DB, os.O_RDWR, 0)
	require.NoError(t, err)
	lk := syscall.Flock_t{Type: syscall.F_WRLCK}
	require.NoError(t, syscall.FcntlFlock(f.Fd(), syscall.F_SETLK, &lk))
	p := clitest.StartIdem(t, nil, "run", j.File)
	require.Equal(t, report.ExitLocked, p.Wait(t, 60*time.Second), p.Stderr.String())
	require.Contains(t, p.Stderr.String(), "(PID "+strconv.Itoa(os.Getpid())+")")
	st, err := os.Stat(j.DB)
	require.NoError(t, err)
	require.Zero(t, st.Size(), "a held empty file was replaced")
	require.NoError(t, f.Close())

	require.Equal(t, report.DecisionApplied, j.Apply().Decision)
	require.Equal(t, report.DecisionAlreadyCommitted, j.Apply().Decision)
}

// Read-only commands on a database that does not exist create nothing:
// query, log and export fail, plan shows a first load.
func TestReadOnlyOpenCreatesNothing(t *testing.T) {
	t.Parallel()
	j := clitest.NewGuardJob(t)
	for _, tc := range []struct {
		args []string
		code int
	}{
		{[]string{"query", "--db", j.DB, "SELECT 1"}, report.ExitFailure},
		{[]string{"log", j.File}, report.ExitFailure},
		{[]string{"export", j.File, "--out", filepath.Join(t.TempDir(), "out.csv")}, report.ExitFailure},
		{[]string{"plan", j.File}, report.ExitOK},
	} {
		args := tc.args
		r := clitest.CallIdem(t, args...)
		require.Equal(t, tc.code, r.Code, "%v: %s %s", args, r.Stdout, r.Stderr)
		entries, err := os.ReadDir(j.Dir)
		require.NoError(t, err)
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		require.Equal(t, []string{"job.toml"}, names, "%v created something", args)
	}
}

func fileSHA(t *testing.T, path string) string {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	h := sha256.New()
	_, err = io.Copy(h, f)
	require.NoError(t, err)
	return hex.EncodeToString(h.Sum(nil))
}

func copyFile(t *testing.T, src, dst string) {
	t.Helper()
	b, err := os.ReadFile(src)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(dst, b, 0o644))
}

// crashAfterCommit runs the job with args and kills it after COMMIT,
// before CHECKPOINT: the commit is only in the WAL. It returns a copy of
// that WAL and lets the database recover (replay and checkpoint).
func crashAfterCommit(t *testing.T, j *clitest.GuardJob, args ...string) string {
	t.Helper()
	p := clitest.StartIdem(t, []string{"IDEM_FAULT=after_commit"}, append([]string{"run", j.File}, args...)...)
	p.Wait(t, 60*time.Second)
	require.FileExists(t, j.DB+".wal", p.Stderr.String())
	wal := filepath.Join(t.TempDir(), "saved.wal")
	copyFile(t, j.DB+".wal", wal)
	return wal
}

// A WAL that does not belong to the database beside it is refused (exit 3)
// before it is replayed into the file, by every command; the database
// file is unchanged, and once the WAL is moved away the database holds
// what it held. The database's own WAL, left by a killed run, is replayed.
func TestForeignWAL(t *testing.T) {
	t.Parallel()
	batch := func(n int) string { return clitest.ChangesFixture(t, "batch-"+strconv.Itoa(n)+".jsonl") }
	cases := []struct {
		name string
		// setup returns the database B and a WAL to put beside it.
		setup func(t *testing.T) (*clitest.GuardJob, string)
	}{
		{"another database", func(t *testing.T) (*clitest.GuardJob, string) {
			a, b := clitest.NewGuardJob(t), clitest.NewGuardJob(t)
			a.Apply()
			b.Apply()
			b.Apply("--input", batch(3))
			return b, crashAfterCommit(t, a, "--input", batch(2))
		}},
		{"another database in the same state", func(t *testing.T) (*clitest.GuardJob, string) {
			a, b := clitest.NewGuardJob(t), clitest.NewGuardJob(t)
			a.Apply()
			b.Apply()
			return b, crashAfterCommit(t, a, "--input", batch(2))
		}},
		{"an older state of this database", func(t *testing.T) (*clitest.GuardJob, string) {
			b := clitest.NewGuardJob(t)
			b.Apply()
			wal := crashAfterCommit(t, b, "--input", batch(2))
			require.Equal(t, report.DecisionAlreadyCommitted, b.Apply("--input", batch(2)).Decision)
			b.Apply("--input", batch(3))
			return b, wal
		}},
		{"a copy that went on alone", func(t *testing.T) (*clitest.GuardJob, string) {
			b := clitest.NewGuardJob(t)
			b.Apply()
			c := clitest.NewGuardJob(t)
			copyFile(t, b.DB, c.DB)
			c.Apply("--input", batch(3))
			return b, crashAfterCommit(t, c, "--input", batch(2))
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b, wal := tc.setup(t)
			before := clitest.CaptureState(t, b.DB)
			sum := fileSHA(t, b.DB)
			copyFile(t, wal, b.DB+".wal")
			replayFailed := 0
			for _, args := range [][]string{
				{"run", b.File, "--input", batch(4)},
				{"log", b.File},
				{"query", "--db", b.DB, "SELECT count(*) FROM idem.ledger"},
				{"fence", b.File},
			} {
				r := clitest.CallIdem(t, args...)
				if r.Code == report.ExitFailure {
					// DuckDB could not replay it: its row ids do not fit.
					require.Contains(t, r.Stderr, "Failure while replaying WAL")
					require.Contains(t, r.Stderr, "("+b.DB+".wal is beside it and DuckDB replays it on open: if it comes from another database or an older copy, move it away)")
					replayFailed++
				} else {
					require.Equal(t, report.ExitRefused, r.Code, "%v: stdout %s stderr %s", args, r.Stdout, r.Stderr)
					require.Contains(t, r.Stderr, b.DB+".wal does not belong to database "+b.DB)
					require.Contains(t, r.Stderr, "Move "+b.DB+".wal away")
				}
				require.Equal(t, sum, fileSHA(t, b.DB), "%v changed the database file", args)
				require.FileExists(t, b.DB+".wal")
			}
			t.Logf("DuckDB failed to replay the WAL on %d of 4 commands; idem refused it on the others", replayFailed)
			require.NoError(t, os.Remove(b.DB+".wal"))
			require.Equal(t, before, clitest.CaptureState(t, b.DB))
		})
	}

	// The database's own WAL is not refused: the killed run's commit is
	// replayed and the retry reports it committed.
	a := clitest.NewGuardJob(t)
	a.Apply()
	crashAfterCommit(t, a, "--input", batch(2))
	require.Equal(t, report.DecisionAlreadyCommitted, a.Apply("--input", batch(2)).Decision)
	require.Empty(t, leftovers(t, a.Dir))
}
