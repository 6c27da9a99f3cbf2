package streamtest

import (
	"fmt"
	"maps"
	"math"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/idem-dev/idem/cmd/idem/cli/internal/clitest"
)

// produced is one record TestStreamBrokerFaultsKilled wrote, where the
// broker put it.
type produced struct {
	rec     *kgo.Record // Partition and Offset set by the broker
	gen     int         // the topic it went to: 0, and one more after each recreate
	id      string      // change_id; "" for a poison record
	entity  string
	version int
	row     string // what the target holds for the entity once this applies ("" if invalid)
}

// TestStreamBrokerFaultsKilled: the broker faults of TestStreamBrokerFaults
// happen while `idem run --follow --allow-gap` is SIGKILLed at random
// moments (and at the commit's fault points) and started again: records
// produced throughout, among them poison records, tombstones that delete
// and tombstones without a version; a partition added; the topic deleted
// and recreated larger than the committed offsets (one partition holding
// more records than the old one had, all in the log before any read of it
// is planned) and then smaller (a record a partition until the next read
// is planned); records deleted past the position the follower had
// reached. Once the trials are over the topic is recreated a third time
// and a follower without --allow-gap is refused (exit 3, both topic IDs
// and the committed positions named, nothing written) before the last one
// reads it. At the end every record produced, of every topic, has exactly
// one outcome or lies in what the run log says was skipped (a gap, or the
// old topic's records past the positions a recreate left, and the whole
// of a topic recreated again before any batch read it), the target equals
// a fold over the records applied (the highest version of each entity, a
// tombstone's delete included), the positions are the last topic's log
// ends and no batch id repeats. By default 3 kills over about 220
// records in 4 topics; IDEM_LONG=1: 20 kills over about 2,400.
func TestStreamBrokerFaultsKilled(t *testing.T) {
	t.Parallel()
	trials := clitest.KillTrials(t, 3, 20)
	chunks, chunk := 3*trials, clitest.LongOr(15, 30)
	const entities = 40
	k := clitest.StartKafka(t, 2)
	work := t.TempDir()
	jobPath := k.JobFile(work, "max_records = 30\n")
	dbPath := filepath.Join(work, "rides.duckdb")

	var all []*produced
	gens := []string{k.TopicID()} // each topic's ID, in the order created
	partitions := int32(2)
	i := 0
	change := func(p int32) *produced {
		i++
		e := fmt.Sprintf("e%d", i%entities)
		if i%7 == 0 { // a tombstone: a delete of the entity at this version
			id := fmt.Sprintf("t%d", i)
			return &produced{rec: &kgo.Record{Topic: "rides", Partition: p, Key: fmt.Appendf(nil, `{"change_id":%q,"entity_id":%q,"source_version":%d}`, id, e, i)},
				id: id, entity: e, version: i, row: fmt.Sprintf("%s %d deleted <nil>", e, i)}
		}
		id := fmt.Sprintf("c%d", i)
		return &produced{rec: &kgo.Record{Topic: "rides", Partition: p, Value: fmt.Appendf(nil, `{"change_id":%q,"entity_id":%q,"source_version":%d,"operation":"upsert","value":"v%d"}`, id, e, i, i)},
			id: id, entity: e, version: i, row: fmt.Sprintf("%s %d active v%d", e, i, i)}
	}
	produce := func(ps ...*produced) {
		recs := make([]*kgo.Record, len(ps))
		for n, p := range ps {
			recs[n] = p.rec
			p.gen = len(gens) - 1
		}
		k.Produce(recs...)
		all = append(all, ps...)
	}
	produceChunk := func(c int) {
		var ps []*produced
		for range chunk {
			ps = append(ps, change(int32(i%int(partitions))))
		}
		p := int32(c) % partitions
		// A poison record, and a tombstone whose key has no version: the
		// pipeline's invalid_version, not a delete at a version idem made up.
		ps = append(ps, &produced{rec: &kgo.Record{Topic: "rides", Partition: p, Value: []byte("{not json")}},
			&produced{rec: &kgo.Record{Topic: "rides", Partition: p, Key: fmt.Appendf(nil, `{"change_id":"nv%d","entity_id":"e1"}`, c)}, id: fmt.Sprintf("nv%d", c)})
		produce(ps...)
	}
	// ends is partition p's log end in the current topic.
	ends := func(p int32) int64 {
		var end int64
		for _, r := range all {
			if r.gen == len(gens)-1 && r.rec.Partition == p {
				end = max(end, r.rec.Offset+1)
			}
		}
		return end
	}
	recreate := func(n int32) {
		k.Recreate(n)
		gens = append(gens, k.TopicID())
		partitions = n
	}

	// Before chunk c, one of the faults.
	fault := func(c int) {
		switch c {
		case chunks / 3:
			k.AddPartitions(3)
			partitions = 3
		case chunks / 2:
			// Recreated larger: one partition with more records than the
			// old partition 0 had, produced before any read of the new
			// topic lists its offsets, so that the offsets alone would
			// look like records past the committed position.
			n := ends(0) + 1
			release := k.HoldReads()
			recreate(1)
			var ps []*produced
			for range n {
				ps = append(ps, change(0))
			}
			produce(ps...)
			release()
		case 2 * chunks / 3:
			// Records deleted at once past what the follower has likely
			// read: a gap it accepts and logs (or, if it read them first,
			// records with their outcomes).
			var ps []*produced
			for range 8 {
				ps = append(ps, change(0))
			}
			produce(ps...)
			k.DeleteBefore(0, ends(0)-2)
		case 5 * chunks / 6:
			// Recreated smaller: a record a partition until the next read
			// is planned (or a while, when the follower was killed first).
			recreate(2)
			read := k.NextRead()
			produce(change(0), change(1))
			select {
			case <-read:
			case <-time.After(2 * time.Second):
			}
		}
	}
	// Three chunks (and their faults) while each trial's follower runs.
	during := func(trial int) {
		for c := 3 * trial; c < 3*trial+3; c++ {
			if c > 0 {
				fault(c)
				produceChunk(c)
			}
			time.Sleep(150 * time.Millisecond)
		}
	}
	produceChunk(0)
	lastRecreate := func() {
		// Recreated once more, and a follower without --allow-gap: refused
		// before it reads anything, nothing written.
		recreate(3)
		produceChunk(chunks)
		before := clitest.CaptureState(t, dbPath)
		positions := clitest.QueryStrs(t, dbPath, `SELECT string_agg(partition || '@' || next, ', ' ORDER BY partition::INT) FROM idem.positions WHERE job = 'rides'`)
		prev := clitest.QueryStrs(t, dbPath, `SELECT json_extract_string(inputs, '$.stream_id') FROM idem.snapshots WHERE job = 'rides' ORDER BY snapshot DESC LIMIT 1`)
		code, out, errOut := clitest.InProcess(t, "run", jobPath, "--follow")
		require.Equal(t, 3, code, out+errOut)
		require.Contains(t, errOut, fmt.Sprintf(`kafka topic "rides" is another log than the one job rides read: its topic ID is %s, and the positions %s were committed from topic ID %s (the topic was deleted and recreated); nothing was read`, gens[3], positions[0], prev[0]))
		require.Equal(t, before, clitest.CaptureState(t, dbPath))
	}
	killed, one, after := clitest.KillFollowDuring(t, work, jobPath, trials, during, lastRecreate, "--allow-gap")
	t.Logf("%d kills of %d trials (a batch took %s), %d records in %d topics, %d batches after the last kill", killed, trials, one.Round(time.Millisecond), len(all), len(gens), after)
	require.GreaterOrEqual(t, killed, trials/2, "most trials must end in a SIGKILL")

	// What the run log says was skipped: gaps, of the topic the batch read,
	// and for each recreate the old topic's records past the positions it
	// left, and every record of a topic between the two IDs it names (one
	// recreated again before any batch read it).
	genOf := func(id string) int {
		g := slices.Index(gens, id)
		require.GreaterOrEqual(t, g, 0, "topic ID %s is none of the topics created", id)
		return g
	}
	gapRe := regexp.MustCompile(`partition (\d+) positions (\d+)-(\d+)`)
	resetRe := regexp.MustCompile(`topic recreated \(--allow-gap\): topic ID ([0-9a-f]+), not ([0-9a-f]+); positions (.*?) left for the new topic's first records`)
	posRe := regexp.MustCompile(`(\d+)@(\d+)`)
	num := func(s string) int64 {
		n, err := strconv.ParseInt(s, 10, 64)
		require.NoError(t, err)
		return n
	}
	type span struct {
		gen         int
		p, from, to int64 // to included
	}
	var spans []span
	unread := map[int]bool{}
	resets := 0
	for _, row := range clitest.QueryStrs(t, dbPath, `SELECT json_extract_string(s.inputs, '$.stream_id') || ' ' || r.message FROM idem.runs r JOIN idem.snapshots s USING (job, snapshot)
		WHERE r.job = 'rides' AND r.decision <> 'refused' AND (r.message LIKE '%gap accepted (--allow-gap)%' OR r.message LIKE '%topic recreated (--allow-gap)%') ORDER BY ALL`) {
		id, msg, _ := strings.Cut(row, " ")
		g := genOf(id)
		for _, m := range gapRe.FindAllStringSubmatch(msg, -1) {
			spans = append(spans, span{g, num(m[1]), num(m[2]), num(m[3])})
		}
		if m := resetRe.FindStringSubmatch(msg); m != nil {
			resets++
			require.Equal(t, id, m[1], "a recreate is logged by a batch of the new topic")
			from := genOf(m[2])
			require.Less(t, from, g)
			named := map[int64]bool{}
			for _, pm := range posRe.FindAllStringSubmatch(m[3], -1) {
				spans = append(spans, span{from, num(pm[1]), num(pm[2]), math.MaxInt64})
				named[num(pm[1])] = true
			}
			// A partition of the old topic no batch read (added after the
			// last batch) has no position: all its records.
			for p := range int64(3) {
				if !named[p] {
					spans = append(spans, span{from, p, 0, math.MaxInt64})
				}
			}
			for u := from + 1; u < g; u++ {
				unread[u] = true
			}
		}
	}
	require.GreaterOrEqual(t, resets, 1, "the last recreate is read with --allow-gap")
	lost := func(r *produced) bool {
		if unread[r.gen] {
			return true
		}
		for _, s := range spans {
			if r.gen == s.gen && int64(r.rec.Partition) == s.p && r.rec.Offset >= s.from && r.rec.Offset <= s.to {
				return true
			}
		}
		return false
	}

	// Every record has one outcome, or lies in what the run log says was
	// skipped; the target is the fold of the records applied.
	wantOutcomes, poison, gapped := map[string]int64{}, int64(0), 0
	fold := map[string]*produced{}
	for _, r := range all {
		if lost(r) {
			gapped++
			continue
		}
		switch {
		case r.id == "":
			poison++
		default:
			wantOutcomes[r.id] = 1
		}
		if r.row != "" && (fold[r.entity] == nil || fold[r.entity].version < r.version) {
			fold[r.entity] = r
		}
	}
	t.Logf("%d records skipped as logged: %d spans, %d recreates read with --allow-gap, topics never read %v", gapped, len(spans), resets, slices.Sorted(maps.Keys(unread)))
	gotOutcomes := map[string]int64{}
	for _, s := range clitest.QueryStrs(t, dbPath, `SELECT change_id || ' ' || count(*) FROM rides_outcomes WHERE change_id IS NOT NULL GROUP BY change_id`) {
		var id string
		var n int64
		_, err := fmt.Sscan(s, &id, &n)
		require.NoError(t, err)
		gotOutcomes[id] = n
	}
	if !maps.Equal(wantOutcomes, gotOutcomes) {
		for _, r := range all {
			if r.id != "" && wantOutcomes[r.id] != gotOutcomes[r.id] {
				t.Logf("%s (topic %d, partition %d, offset %d): %d outcomes, want %d", r.id, r.gen, r.rec.Partition, r.rec.Offset, gotOutcomes[r.id], wantOutcomes[r.id])
			}
		}
		t.Logf("topics %v; the run log:\n%s", gens, strings.Join(clitest.QueryStrs(t, dbPath, `SELECT concat_ws(' | ', snapshot, batch_id, decision, message) FROM idem.runs WHERE job = 'rides' ORDER BY run_at`), "\n"))
	}
	require.Equal(t, wantOutcomes, gotOutcomes, "one outcome per record that is not in a logged gap")
	require.Equal(t, []int64{poison, int64(len(all) - gapped)}, clitest.QueryInts(t, dbPath, `SELECT count(*) FILTER (WHERE outcome = 'invalid_json') FROM rides_outcomes UNION ALL SELECT count(*) FROM rides_outcomes`))
	require.Equal(t, []string{}, clitest.QueryStrs(t, dbPath, `SELECT DISTINCT outcome FROM rides_outcomes WHERE outcome NOT IN ('accepted', 'superseded_in_batch', 'stale', 'invalid_json', 'invalid_version') OR (outcome = 'invalid_version') <> starts_with(change_id, 'nv')`))
	want := make([]string, 0, len(fold))
	for _, r := range fold {
		want = append(want, r.row)
	}
	slices.Sort(want)
	require.Equal(t, want, clitest.QueryStrs(t, dbPath, `SELECT concat_ws(' ', entity_id, source_version, status, coalesce(value, '<nil>')) FROM rides ORDER BY ALL`))
	require.Equal(t, []int64{ends(0), ends(1), ends(2)}, clitest.QueryInts(t, dbPath, `SELECT next FROM idem.positions WHERE job = 'rides' ORDER BY partition`))
	require.Equal(t, []int64{0}, clitest.QueryInts(t, dbPath, `SELECT count(*) - count(DISTINCT batch_id) FROM idem.ledger WHERE job = 'rides'`))
	// The batches of a recreated topic are named after its ID.
	require.Equal(t, []string{}, clitest.QueryStrs(t, dbPath, `SELECT s.batch_id FROM idem.snapshots s WHERE s.job = 'rides' AND s.batch_id IS NOT NULL
		AND starts_with(s.batch_id, 'rides@') <> (json_extract_string(s.inputs, '$.stream_id') <> ?)`, gens[0]))
}
