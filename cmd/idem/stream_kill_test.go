package main

import (
	"math/rand/v2"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestStreamKillFollow: exactly once across crashes. Messages are produced
// to a 3-partition topic while `idem run --follow` applies them; the test
// SIGKILLs idem at random moments (and at the commit's fault points) and
// restarts it each time. At the end the target is one pass over every
// message, every message has exactly one outcome (accepted, or
// superseded_in_batch by a newer change of its entity in the same batch;
// each entity's last change accepted), and idem.positions equals the log
// ends. By default 6 kills (the four fault points and two random delays)
// over 3,000 messages; IDEM_LONG=1: 20 kills over 50,000 messages
// (IDEM_KILL_TRIALS=N sets the number of kills).
func TestStreamKillFollow(t *testing.T) {
	t.Parallel()
	trials := killTrials(t, 6, 20)
	n := longOr(3000, 50000)
	const entities, partitions = 500, 3
	k := startKafka(t, partitions)
	work := t.TempDir()
	jobPath := k.jobFile(work, "max_records = 500\n")
	dbPath := filepath.Join(work, "rides.duckdb")

	// The producer spreads the messages over the kill phase.
	var wg sync.WaitGroup
	wg.Add(1)
	chunk := max(n/(trials*8), 50)
	go func() {
		defer wg.Done()
		for i := 0; i < n; i += chunk {
			recs := make([]*kgo.Record, 0, chunk)
			for j := i; j < min(i+chunk, n); j++ {
				recs = append(recs, rideChange(j, entities, partitions))
			}
			k.produce(recs...)
			time.Sleep(100 * time.Millisecond)
		}
	}()
	killed, one, after := killFollow(t, work, jobPath, trials, wg.Wait)
	batches := queryInts(t, dbPath, `SELECT count(*) FROM idem.ledger WHERE job = 'rides'`)[0]
	t.Logf("%d kills of %d trials (a batch took %s), %d messages, %d batches, %d of them after the last kill", killed, trials, one.Round(time.Millisecond), n, batches, after)
	require.Less(t, int64(after), batches, "processes that were killed later committed batches")
	require.GreaterOrEqual(t, killed, trials/2, "most trials must end in a SIGKILL")

	require.Equal(t, []int64{int64(n), int64(n)}, queryInts(t, dbPath, `SELECT count(*) FROM rides_outcomes UNION ALL SELECT count(DISTINCT change_id) FROM rides_outcomes`))
	require.Equal(t, []string{}, queryStrs(t, dbPath, `SELECT concat_ws(' ', change_id, entity_id, source_version, outcome, batch_id) FROM rides_outcomes WHERE outcome NOT IN ('accepted', 'superseded_in_batch')`))
	require.Equal(t, foldRides(n, entities), queryStrs(t, dbPath, `SELECT concat_ws(' ', entity_id, source_version, value) FROM rides ORDER BY entity_id`))
	require.Equal(t, []int64{int64(min(n, entities))}, queryInts(t, dbPath, `SELECT count(*) FROM rides_outcomes o JOIN rides r ON o.change_id = 'c' || (r.source_version - 1) WHERE o.outcome = 'accepted'`))
	require.Equal(t, logEnds(n, entities, partitions), queryInts(t, dbPath, `SELECT next FROM idem.positions ORDER BY partition`))
	// Every committed batch is in the ledger once, and its snapshot's
	// positions are the ones committed last.
	require.Equal(t, []int64{0}, queryInts(t, dbPath, `SELECT count(*) - count(DISTINCT batch_id) FROM idem.ledger WHERE job = 'rides'`))
}

// killFollow runs a stream job's follower under SIGKILLs: a first
// `idem run JOB --follow --max-batches 1` commits one batch unharmed, and
// how long it took (start, open, read, apply, commit) scales the random
// kill delays, so that on a slow machine the killed processes commit
// batches too; then trials followers are killed at the commit's fault
// points (the first four) and at random delays; once produced returns (the source holds
// every record), a last follower runs until idle. It returns how many
// trials ended in a SIGKILL, the first batch's time and the batches the
// last follower committed.
func killFollow(t *testing.T, work, jobPath string, trials int, produced func()) (killed int, one time.Duration, after int) {
	t.Helper()
	start := time.Now()
	r := killCLI(t, work, "", 0, "run", jobPath, "--follow", "--max-batches", "1", "--json")
	require.Equal(t, 0, r.code, r.stderr)
	one = time.Since(start)
	faults := []string{"before_commit", "after_commit", "checkpoint", "after_target"}
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7))
	for i := 0; i < trials; i++ {
		fault := ""
		if i < len(faults) {
			fault = faults[i]
		}
		delay := one/4 + time.Duration(rng.Int64N(int64(2*one)))
		r := killCLI(t, work, fault, delay, "run", jobPath, "--follow", "--json")
		if r.killed {
			killed++
		} else {
			require.Equal(t, 0, r.code, "trial %d (fault %q): %s", i, fault, r.stderr)
		}
	}
	produced()
	r = killCLI(t, work, "", 0, "run", jobPath, "--follow", "--idle-exit", "1500ms", "--json")
	require.Equal(t, 0, r.code, r.stderr)
	return killed, one, len(batchLines(t, r.stdout))
}
