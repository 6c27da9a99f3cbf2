package crashtest

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/idem-dev/idem/internal/report"
	"github.com/idem-dev/idem/internal/run"

	"github.com/idem-dev/idem/cmd/idem/cli/internal/clitest"
	"github.com/stretchr/testify/require"
)

// A second process that finds the database held exits 4 at once, naming
// the database and the holder's PID, and writes nothing; with --wait it
// retries and commits once the holder lets go.
func TestSecondProcessIsLockedOut(t *testing.T) {
	t.Parallel()
	j := clitest.NewGuardJob(t)
	j.Apply("--input", clitest.ChangesFixture(t, "batch-1.jsonl"))
	before := clitest.CaptureState(t, j.DB)
	ctx := context.Background()

	holder, err := run.Open(ctx, j.DB, run.OpenOptions{})
	require.NoError(t, err)
	// IDEM_FAULT=open_wait would kill it, had it started to wait.
	p := clitest.StartIdem(t, []string{"IDEM_FAULT=" + run.FaultOpenWait}, "run", j.File, "--input", clitest.ChangesFixture(t, "batch-2.jsonl"))
	code := p.Wait(t, time.Minute)
	require.Equal(t, report.ExitLocked, code, "a locked-out writer gives up at once; stderr: %s", p.Stderr.String())
	t.Logf("locked out after %v (process start included)", p.Elapsed)
	require.Contains(t, p.Stderr.String(), "database "+j.DB+" is held by another writer")
	require.Contains(t, p.Stderr.String(), fmt.Sprintf("(PID %d)", os.Getpid()))

	pj := clitest.StartIdem(t, nil, "run", j.File, "--input", clitest.ChangesFixture(t, "batch-2.jsonl"), "--json")
	require.Equal(t, report.ExitLocked, pj.Wait(t, time.Minute))
	var jsonErr struct {
		Error    string `json:"error"`
		ExitCode int    `json:"exit_code"`
	}
	require.NoError(t, json.Unmarshal(pj.Stdout.Bytes(), &jsonErr), pj.Stdout.String())
	require.Equal(t, report.ExitLocked, jsonErr.ExitCode)
	require.Contains(t, jsonErr.Error, j.DB)
	pf := clitest.StartIdem(t, nil, "fence", j.File)
	require.Equal(t, report.ExitLocked, pf.Wait(t, time.Minute), pf.Stderr.String())
	require.NoError(t, holder.Close())
	require.Equal(t, before, clitest.CaptureState(t, j.DB), "a locked-out process wrote something")

	// --wait: the run starts while the database is held and commits once
	// the holder closes it.
	holder, err = run.Open(ctx, j.DB, run.OpenOptions{})
	require.NoError(t, err)
	// It reports that it waits (IDEM_FAULT=block:open_wait holds it there
	// until released), and commits once the holder has let go.
	pw := clitest.StartBlocked(t, "", run.FaultOpenWait, "run", j.File, "--input", clitest.ChangesFixture(t, "batch-2.jsonl"), "--wait", "10m", "--json")
	require.NoError(t, holder.Close())
	code, stdout, stderr := pw.Wait(t)
	require.Equal(t, 0, code, "stderr: %s", stderr)
	var res run.Result
	require.NoError(t, json.Unmarshal([]byte(stdout), &res), stdout)
	require.Equal(t, report.DecisionApplied, res.Decision)
	require.Equal(t, int64(2), res.Snapshot)

	// --wait gives up with exit 4 when the holder keeps the file.
	holder, err = run.Open(ctx, j.DB, run.OpenOptions{})
	require.NoError(t, err)
	defer holder.Close()
	pg := clitest.StartIdem(t, nil, "run", j.File, "--input", clitest.ChangesFixture(t, "batch-3.jsonl"), "--wait", "300ms")
	require.Equal(t, report.ExitLocked, pg.Wait(t, time.Minute), pg.Stderr.String())
	require.GreaterOrEqual(t, pg.Elapsed, 300*time.Millisecond)
}

// bigInput writes a jsonl batch of n rows that takes the pipeline a few
// seconds, and returns its path and sha256.
func bigInput(t *testing.T, dir string, n int) (string, string) {
	t.Helper()
	path := filepath.Join(dir, "big.jsonl")
	f, err := os.Create(path)
	require.NoError(t, err)
	h := sha256.New()
	w := bufio.NewWriterSize(io.MultiWriter(f, h), 1<<20)
	for i := range n {
		fmt.Fprintf(w, `{"change_id":"big-%d","entity_id":"e-%d","source_version":%d,"operation":"upsert","value":"v%d"}`+"\n", i, i%50000, i+1, i)
	}
	require.NoError(t, w.Flush())
	require.NoError(t, f.Close())
	return path, hex.EncodeToString(h.Sum(nil))
}

// Ctrl-C in the middle of a run interrupts DuckDB, rolls back and says
// nothing was committed (exit 1); the same run again commits normally.
func TestInterruptRollsBack(t *testing.T) {
	t.Parallel()
	j := clitest.NewGuardJob(t)
	j.Apply("--input", clitest.ChangesFixture(t, "batch-1.jsonl"), "--from", "0", "--to", "10")
	// Enough rows that the run is still in its steps a second after its
	// input is retained, however fast the machine: a run that committed
	// before the signal would leave nothing to roll back.
	const rows = 250_000
	big, sum := bigInput(t, j.Dir, rows)
	before := clitest.CaptureState(t, j.DB)

	// The signal may land while idem stages the input (Go cancels it) or
	// while DuckDB runs a step (DuckDB's query is interrupted). Either way
	// nothing is committed; the test waits longer until it has seen the
	// second at least once.
	reached := false
	for _, delay := range []time.Duration{150 * time.Millisecond, 300 * time.Millisecond, 500 * time.Millisecond, 800 * time.Millisecond} {
		p := clitest.StartIdem(t, nil, "run", j.File, "--input", big, "--from", "10", "--to", "20")
		// The retained copy of the input appears inside the run's
		// transaction, just before staging.
		retained := filepath.Join(j.DB+".inputs", sum[:2], sum)
		deadline := time.Now().Add(2 * time.Minute)
		for {
			if _, err := os.Stat(retained); err == nil {
				break
			}
			require.False(t, p.Exited(), "the run ended before it was interrupted: %s", p.Stderr.String())
			require.True(t, time.Now().Before(deadline), "the run never started")
			time.Sleep(5 * time.Millisecond)
		}
		time.Sleep(delay)
		require.False(t, p.Exited(), "the run ended before it was interrupted: %s", p.Stderr.String())
		signaled := time.Now()
		require.NoError(t, p.Cmd.Process.Signal(os.Interrupt))
		code := p.Wait(t, time.Minute)
		stopped := time.Since(signaled)
		t.Logf("signaled %v after the retained copy appeared, exited %v after SIGINT; stderr: %s", delay, stopped, p.Stderr.String())
		require.Equal(t, report.ExitFailure, code, "stdout %s stderr %s", p.Stdout.String(), p.Stderr.String())
		require.Empty(t, p.Stdout.String())
		require.Contains(t, p.Stderr.String(), "canceled, nothing was committed")
		require.Less(t, stopped, 20*time.Second, "an interrupted run stops promptly")
		require.Equal(t, before, clitest.CaptureState(t, j.DB))
		if strings.Contains(p.Stderr.String(), "INTERRUPT Error") {
			reached = true
			break
		}
	}
	require.True(t, reached, "the interrupt must reach DuckDB's query")
	runs := j.Log()
	require.Equal(t, report.DecisionFailed, runs[0].Decision)
	require.Contains(t, *runs[0].Message, "nothing was committed")

	start := time.Now()
	res := j.Apply("--input", big, "--from", "10", "--to", "20")
	t.Logf("the uninterrupted run took %v", time.Since(start))
	require.Equal(t, report.DecisionApplied, res.Decision)
	require.Equal(t, int64(rows), res.RowsIn)
	require.Equal(t, []int64{2, 20}, []int64{res.Snapshot, res.Cursor})
}

// The run log's times are UTC and its order is the order runs were
// recorded in, whatever time zone each process ran in.
func TestLogOrderAcrossTimeZones(t *testing.T) {
	t.Parallel()
	j := clitest.NewGuardJob(t)
	steps := []struct {
		tz   string
		args []string
	}{
		{"Pacific/Kiritimati", []string{"run", j.File, "--input", clitest.ChangesFixture(t, "batch-1.jsonl")}}, // UTC+14
		{"Pacific/Pago_Pago", []string{"fence", j.File}},                                                       // UTC-11
		{"Asia/Kolkata", []string{"run", j.File, "--input", clitest.ChangesFixture(t, "batch-2.jsonl")}},
		{"Pacific/Kiritimati", []string{"run", j.File, "--input", clitest.ChangesFixture(t, "batch-2.jsonl")}},
	}
	start := time.Now().Add(-time.Second)
	for _, s := range steps {
		p := clitest.StartIdem(t, []string{"TZ=" + s.tz}, s.args...)
		require.Equal(t, 0, p.Wait(t, time.Minute), p.Stderr.String())
	}
	end := time.Now().Add(time.Second)
	var decisions []string
	for _, e := range j.Log() {
		decisions = append(decisions, e.Decision)
		require.True(t, e.Time.After(start) && e.Time.Before(end), "run_at %v is not the UTC time of the run (%v..%v)", e.Time, start, end)
	}
	require.Equal(t, []string{"already_committed", "applied", "fenced", "applied"}, decisions)
}

// A lost success response for real: the writer dies right after COMMIT,
// before it can print anything. The retry finds the batch in the ledger
// and reports it already committed, with its snapshot and counts.
func TestRetryAfterCrashPastCommit(t *testing.T) {
	t.Parallel()
	j := clitest.NewGuardJob(t)
	j.Apply("--input", clitest.ChangesFixture(t, "batch-1.jsonl"))
	p := clitest.StartIdem(t, []string{"IDEM_FAULT=" + run.FaultAfterCommit}, "run", j.File, "--input", clitest.ChangesFixture(t, "batch-2.jsonl"), "--json")
	require.NotEqual(t, 0, p.Wait(t, time.Minute))
	require.Empty(t, p.Stdout.String(), "the response was lost")

	before := clitest.CaptureState(t, j.DB)
	retry := j.Apply("--input", clitest.ChangesFixture(t, "batch-2.jsonl"))
	require.Equal(t, report.DecisionAlreadyCommitted, retry.Decision)
	require.Equal(t, int64(2), retry.Snapshot)
	require.Equal(t, int64(8), retry.RowsIn)
	require.Equal(t, map[string]int64{"accepted": 3, "conflict": 3, "duplicate": 1, "superseded_in_batch": 1}, retry.Outcomes)
	require.Equal(t, before, clitest.CaptureState(t, j.DB))
}

// TestPanicRollsBack: a panic inside a run's transaction (IDEM_FAULT=
// panic:<point>, as a bug in idem would) ends the process, exit 2 with
// Go's stack, and leaves the database as it was; before, the unwinding
// waited forever to close the connection the open transaction held. The
// same run then commits normally.
func TestPanicRollsBack(t *testing.T) {
	t.Parallel()
	j := clitest.NewGuardJob(t)
	j.Apply("--input", clitest.ChangesFixture(t, "batch-1.jsonl"), "--from", "0", "--to", "10")
	batch2 := clitest.ChangesFixture(t, "batch-2.jsonl")
	before := clitest.CaptureState(t, j.DB)
	for _, point := range []string{"after_step:02_rank.sql", "before_commit"} {
		p := clitest.StartIdem(t, []string{"IDEM_FAULT=panic:" + point}, "run", j.File, "--input", batch2, "--from", "10", "--to", "20")
		code := p.Wait(t, time.Minute)
		require.Equal(t, 2, code, "a panic at %s: stderr %s", point, p.Stderr.String())
		require.Contains(t, p.Stderr.String(), "panic: IDEM_FAULT=panic:"+point)
		require.Equal(t, before, clitest.CaptureState(t, j.DB), "a panic at %s", point)
	}
	res := j.Apply("--input", batch2, "--from", "10", "--to", "20")
	require.Equal(t, report.DecisionApplied, res.Decision)
	require.Equal(t, []int64{2, 20}, []int64{res.Snapshot, res.Cursor})

	// An erasure's transaction, as a run's.
	key := clitest.QueryStrs(t, j.DB, `SELECT min(entity_id) FROM `+clitest.ApplyTable)[0]
	before = clitest.CaptureState(t, j.DB)
	p := clitest.StartIdem(t, []string{"IDEM_FAULT=panic:before_commit"}, "erase", j.File, "--key", key)
	require.Equal(t, 2, p.Wait(t, time.Minute), "a panic in erase: stderr %s", p.Stderr.String())
	require.Contains(t, p.Stderr.String(), "panic: IDEM_FAULT=panic:before_commit")
	require.Equal(t, before, clitest.CaptureState(t, j.DB), "a panic in erase")
}
