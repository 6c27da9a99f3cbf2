package streamtest

import (
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/idem-dev/idem/cmd/idem/cli/internal/clitest"
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
// ends, and each poison record produced among them is one invalid_json
// outcome. By default 6 kills (the four fault points and two random delays)
// over 3,000 messages; IDEM_LONG=1: 20 kills over 50,000 messages
// (IDEM_KILL_TRIALS=N sets the number of kills).
func TestStreamKillFollow(t *testing.T) {
	t.Parallel()
	trials := clitest.KillTrials(t, 6, 20)
	n := clitest.LongOr(3000, 50000)
	const entities, partitions = 500, 3
	k := clitest.StartKafka(t, partitions)
	work := t.TempDir()
	jobPath := k.JobFile(work, "max_records = 500\n")
	dbPath := filepath.Join(work, "rides.duckdb")

	// The producer spreads the messages over the kill phase, a poison
	// record (not one JSON object) after each chunk.
	var wg sync.WaitGroup
	wg.Add(1)
	chunk := max(n/(trials*8), 50)
	poison := 0
	go func() {
		defer wg.Done()
		for i := 0; i < n; i += chunk {
			recs := make([]*kgo.Record, 0, chunk+1)
			for j := i; j < min(i+chunk, n); j++ {
				recs = append(recs, clitest.RideChange(j, entities, partitions))
			}
			recs = append(recs, &kgo.Record{Topic: "rides", Partition: int32(i/chunk) % partitions, Value: []byte("{not json")})
			poison++
			k.Produce(recs...)
			time.Sleep(100 * time.Millisecond)
		}
	}()
	killed, one, after := clitest.KillFollow(t, work, jobPath, trials, wg.Wait)
	batches := clitest.QueryInts(t, dbPath, `SELECT count(*) FROM idem.ledger WHERE job = 'rides'`)[0]
	t.Logf("%d kills of %d trials (a batch took %s), %d messages, %d batches, %d of them after the last kill", killed, trials, one.Round(time.Millisecond), n, batches, after)
	require.Less(t, int64(after), batches, "processes that were killed later committed batches")
	require.GreaterOrEqual(t, killed, trials/2, "most trials must end in a SIGKILL")

	require.Equal(t, []int64{int64(n + poison), int64(n), int64(poison)}, clitest.QueryInts(t, dbPath, `SELECT count(*) FROM rides_outcomes UNION ALL SELECT count(DISTINCT change_id) FROM rides_outcomes UNION ALL SELECT count(*) FROM rides_outcomes WHERE outcome = 'invalid_json'`))
	require.Equal(t, []string{}, clitest.QueryStrs(t, dbPath, `SELECT concat_ws(' ', change_id, entity_id, source_version, outcome, batch_id) FROM rides_outcomes WHERE outcome NOT IN ('accepted', 'superseded_in_batch', 'invalid_json')`))
	require.Equal(t, clitest.FoldRides(n, entities), clitest.QueryStrs(t, dbPath, `SELECT concat_ws(' ', entity_id, source_version, value) FROM rides ORDER BY entity_id`))
	require.Equal(t, []int64{int64(min(n, entities))}, clitest.QueryInts(t, dbPath, `SELECT count(*) FROM rides_outcomes o JOIN rides r ON o.change_id = 'c' || (r.source_version - 1) WHERE o.outcome = 'accepted'`))
	ends := clitest.LogEnds(n, entities, partitions)
	for c := range poison {
		ends[c%partitions]++
	}
	require.Equal(t, ends, clitest.QueryInts(t, dbPath, `SELECT next FROM idem.positions ORDER BY partition`))
	// Every committed batch is in the ledger once, and its snapshot's
	// positions are the ones committed last.
	require.Equal(t, []int64{0}, clitest.QueryInts(t, dbPath, `SELECT count(*) - count(DISTINCT batch_id) FROM idem.ledger WHERE job = 'rides'`))
}
