package main

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

	"github.com/idem-dev/idem/internal/job"
	"github.com/idem-dev/idem/internal/run"

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
// once: each commits or exits 4 (with --wait each commits), the database
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
		for round := range dbOpenRounds(t, longOr(1, 10)) {
			j := newGuardJob(t)
			var ps []*idemProcess
			for range procs {
				args := []string{"run", j.file, "--json"}
				if wait {
					args = append(args, "--wait", "60s")
				}
				ps = append(ps, startIdem(t, nil, args...))
			}
			decisions := map[string]int{}
			for _, p := range ps {
				code := p.wait(t, 120*time.Second)
				if code == job.ExitLocked && !wait {
					require.Contains(t, p.stderr.String(), "is held by another writer")
					continue
				}
				require.Equal(t, 0, code, "wait=%v round %d: stderr: %s", wait, round, p.stderr.String())
				var res run.Result
				require.NoError(t, json.Unmarshal(p.stdout.Bytes(), &res), p.stdout.String())
				decisions[res.Decision]++
			}
			require.Equal(t, 1, decisions[job.DecisionApplied], "wait=%v round %d: decisions %v", wait, round, decisions)
			if wait {
				require.Equal(t, procs-1, decisions[job.DecisionAlreadyCommitted], "decisions %v", decisions)
			}
			st, err := os.Stat(j.db)
			require.NoError(t, err)
			require.Positive(t, st.Size(), "a 0-byte database was left")
			require.Empty(t, leftovers(t, j.dir))
			require.Equal(t, job.DecisionAlreadyCommitted, j.apply().Decision)
			snap, _, _ := j.state()
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
		j := newGuardJob(t)
		var r cliResult
		if fault != "" {
			r = killCLI(t, j.dir, fault, 0, "run", j.file)
			require.True(t, r.killed, "IDEM_FAULT=%s did not kill: %d %s", fault, r.code, r.stderr)
			require.Contains(t, r.stderr, "killing the process at "+fault)
		} else {
			r = killCLI(t, j.dir, "", delay, "run", j.file)
			if !r.killed {
				require.Equal(t, 0, r.code, r.stderr)
			}
		}
		var o outcome
		o.creating = len(leftovers(t, j.dir)) > 0
		if st, err := os.Stat(j.db); err == nil {
			require.Positive(t, st.Size(), "a killed creation left a 0-byte database")
			o.database = true
		}
		res := j.apply()
		require.Contains(t, []string{job.DecisionApplied, job.DecisionAlreadyCommitted}, res.Decision)
		require.Empty(t, leftovers(t, j.dir), "the next run did not sweep what the killed one left")
		snap, _, _ := j.state()
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
		j := newGuardJob(t)
		p := startIdem(t, nil, "run", j.file)
		var start, end time.Duration
		for !p.exited() && end == 0 {
			if start == 0 && len(leftovers(t, j.dir)) > 0 {
				start = time.Since(p.started)
			}
			if _, err := os.Stat(j.db); err == nil {
				end = time.Since(p.started)
			}
			time.Sleep(200 * time.Microsecond)
		}
		require.Equal(t, 0, p.wait(t, time.Minute), p.stderr.String())
		require.NotZero(t, end, "the database never appeared")
		lo, hi := start*8/10, end*12/10
		outcomes := map[outcome]int{}
		for range dbOpenRounds(t, longOr(1, 20)) {
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
	j := newGuardJob(t)
	require.NoError(t, os.WriteFile(j.db, nil, 0o644))
	f, err := os.OpenFile(j.db, os.O_RDWR, 0)
	require.NoError(t, err)
	lk := syscall.Flock_t{Type: syscall.F_WRLCK}
	require.NoError(t, syscall.FcntlFlock(f.Fd(), syscall.F_SETLK, &lk))
	p := startIdem(t, nil, "run", j.file)
	require.Equal(t, job.ExitLocked, p.wait(t, 60*time.Second), p.stderr.String())
	require.Contains(t, p.stderr.String(), "(PID "+strconv.Itoa(os.Getpid())+")")
	st, err := os.Stat(j.db)
	require.NoError(t, err)
	require.Zero(t, st.Size(), "a held empty file was replaced")
	require.NoError(t, f.Close())

	require.Equal(t, job.DecisionApplied, j.apply().Decision)
	require.Equal(t, job.DecisionAlreadyCommitted, j.apply().Decision)
}

// Read-only commands on a database that does not exist create nothing:
// query, log and export fail, plan shows a first load.
func TestReadOnlyOpenCreatesNothing(t *testing.T) {
	t.Parallel()
	j := newGuardJob(t)
	for _, tc := range []struct {
		args []string
		code int
	}{
		{[]string{"query", "--db", j.db, "SELECT 1"}, job.ExitFailure},
		{[]string{"log", j.file}, job.ExitFailure},
		{[]string{"export", j.file, "--out", filepath.Join(t.TempDir(), "out.csv")}, job.ExitFailure},
		{[]string{"plan", j.file}, job.ExitOK},
	} {
		args := tc.args
		r := callIdem(t, args...)
		require.Equal(t, tc.code, r.code, "%v: %s %s", args, r.stdout, r.stderr)
		entries, err := os.ReadDir(j.dir)
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
func crashAfterCommit(t *testing.T, j *guardJob, args ...string) string {
	t.Helper()
	p := startIdem(t, []string{"IDEM_FAULT=after_commit"}, append([]string{"run", j.file}, args...)...)
	p.wait(t, 60*time.Second)
	require.FileExists(t, j.db+".wal", p.stderr.String())
	wal := filepath.Join(t.TempDir(), "saved.wal")
	copyFile(t, j.db+".wal", wal)
	return wal
}

// A WAL that does not belong to the database beside it is refused (exit 3)
// before it is replayed into the file, by every command; the database
// file is unchanged, and once the WAL is moved away the database holds
// what it held. The database's own WAL, left by a killed run, is replayed.
func TestForeignWAL(t *testing.T) {
	t.Parallel()
	batch := func(n int) string { return changesFixture(t, "batch-"+strconv.Itoa(n)+".jsonl") }
	cases := []struct {
		name string
		// setup returns the database B and a WAL to put beside it.
		setup func(t *testing.T) (*guardJob, string)
	}{
		{"another database", func(t *testing.T) (*guardJob, string) {
			a, b := newGuardJob(t), newGuardJob(t)
			a.apply()
			b.apply()
			b.apply("--input", batch(3))
			return b, crashAfterCommit(t, a, "--input", batch(2))
		}},
		{"another database in the same state", func(t *testing.T) (*guardJob, string) {
			a, b := newGuardJob(t), newGuardJob(t)
			a.apply()
			b.apply()
			return b, crashAfterCommit(t, a, "--input", batch(2))
		}},
		{"an older state of this database", func(t *testing.T) (*guardJob, string) {
			b := newGuardJob(t)
			b.apply()
			wal := crashAfterCommit(t, b, "--input", batch(2))
			require.Equal(t, job.DecisionAlreadyCommitted, b.apply("--input", batch(2)).Decision)
			b.apply("--input", batch(3))
			return b, wal
		}},
		{"a copy that went on alone", func(t *testing.T) (*guardJob, string) {
			b := newGuardJob(t)
			b.apply()
			c := newGuardJob(t)
			copyFile(t, b.db, c.db)
			c.apply("--input", batch(3))
			return b, crashAfterCommit(t, c, "--input", batch(2))
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b, wal := tc.setup(t)
			before := captureState(t, b.db)
			sum := fileSHA(t, b.db)
			copyFile(t, wal, b.db+".wal")
			replayFailed := 0
			for _, args := range [][]string{
				{"run", b.file, "--input", batch(4)},
				{"log", b.file},
				{"query", "--db", b.db, "SELECT count(*) FROM idem.ledger"},
				{"fence", b.file},
			} {
				r := callIdem(t, args...)
				if r.code == job.ExitFailure {
					// DuckDB could not replay it: its row ids do not fit.
					require.Contains(t, r.stderr, "Failure while replaying WAL")
					require.Contains(t, r.stderr, "("+b.db+".wal is beside it and DuckDB replays it on open: if it comes from another database or an older copy, move it away)")
					replayFailed++
				} else {
					require.Equal(t, job.ExitRefused, r.code, "%v: stdout %s stderr %s", args, r.stdout, r.stderr)
					require.Contains(t, r.stderr, b.db+".wal does not belong to database "+b.db)
					require.Contains(t, r.stderr, "Move "+b.db+".wal away")
				}
				require.Equal(t, sum, fileSHA(t, b.db), "%v changed the database file", args)
				require.FileExists(t, b.db+".wal")
			}
			t.Logf("DuckDB failed to replay the WAL on %d of 4 commands; idem refused it on the others", replayFailed)
			require.NoError(t, os.Remove(b.db+".wal"))
			require.Equal(t, before, captureState(t, b.db))
		})
	}

	// The database's own WAL is not refused: the killed run's commit is
	// replayed and the retry reports it committed.
	a := newGuardJob(t)
	a.apply()
	crashAfterCommit(t, a, "--input", batch(2))
	require.Equal(t, job.DecisionAlreadyCommitted, a.apply("--input", batch(2)).Decision)
	require.Empty(t, leftovers(t, a.dir))
}
