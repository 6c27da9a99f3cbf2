package streamtest

import (
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
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
	id      string      // change_id; "" for a poison record
	entity  string
	version int
	row     string // what the target holds for the entity once this applies ("" if invalid)
}

// TestStreamBrokerFaultsKilled: the broker faults of TestStreamBrokerFaults
// happen while `idem run --follow --allow-gap` is SIGKILLed at random
// moments (and at the commit's fault points) and started again: records
// produced throughout, among them poison records, tombstones that delete
// and tombstones without a version; a partition added; records deleted
// past the position the follower had reached. At the end every record
// produced has exactly one outcome or lies in a gap the run log names, the
// target equals a fold over the records applied (the highest version of
// each entity, a tombstone's delete included), and the positions are the
// log ends. By default 3 kills over about 400 records; IDEM_LONG=1: 20
// kills over about 6,000.
func TestStreamBrokerFaultsKilled(t *testing.T) {
	t.Parallel()
	trials := clitest.KillTrials(t, 3, 20)
	chunks, chunk := 3*trials, clitest.LongOr(40, 100)
	const entities = 40
	k := clitest.StartKafka(t, 2)
	work := t.TempDir()
	jobPath := k.JobFile(work, "max_records = 30\n")
	dbPath := filepath.Join(work, "rides.duckdb")

	var all []*produced
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
	ends := func(p int32) int64 {
		var end int64
		for _, r := range all {
			if r.rec.Partition == p {
				end = max(end, r.rec.Offset+1)
			}
		}
		return end
	}

	produceChunk(0)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for c := 1; c < chunks; c++ {
			switch c {
			case chunks / 3:
				k.AddPartitions(3)
				partitions = 3
			case 2 * chunks / 3:
				// Records deleted at once past what the follower has
				// likely read: a gap it accepts and logs (or, if it read
				// them first, records with their outcomes).
				var ps []*produced
				for range 8 {
					ps = append(ps, change(0))
				}
				produce(ps...)
				k.DeleteBefore(0, ends(0)-2)
			}
			produceChunk(c)
			time.Sleep(150 * time.Millisecond)
		}
	}()
	killed, one, after := clitest.KillFollow(t, work, jobPath, trials, func() { <-done }, "--allow-gap")
	t.Logf("%d kills of %d trials (a batch took %s), %d records, %d batches after the last kill", killed, trials, one.Round(time.Millisecond), len(all), after)
	require.GreaterOrEqual(t, killed, trials/2, "most trials must end in a SIGKILL")

	// The gaps the run log names.
	gapRe := regexp.MustCompile(`partition (\d+) positions (\d+)-(\d+)`)
	type span struct{ p, from, to int64 }
	var gaps []span
	for _, msg := range clitest.QueryStrs(t, dbPath, `SELECT message FROM idem.runs WHERE job = 'rides' AND message LIKE '%gap accepted (--allow-gap)%' ORDER BY ALL`) {
		for _, m := range gapRe.FindAllStringSubmatch(msg, -1) {
			p, _ := strconv.ParseInt(m[1], 10, 64)
			from, _ := strconv.ParseInt(m[2], 10, 64)
			to, _ := strconv.ParseInt(m[3], 10, 64)
			gaps = append(gaps, span{p, from, to})
		}
	}
	lost := func(r *produced) bool {
		for _, g := range gaps {
			if int64(r.rec.Partition) == g.p && r.rec.Offset >= g.from && r.rec.Offset <= g.to {
				return true
			}
		}
		return false
	}

	// Every record has one outcome, or lies in a logged gap; the target is
	// the fold of the records applied.
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
	t.Logf("%d records in %d logged gaps", gapped, len(gaps))
	gotOutcomes := map[string]int64{}
	for _, s := range clitest.QueryStrs(t, dbPath, `SELECT change_id || ' ' || count(*) FROM rides_outcomes WHERE change_id IS NOT NULL GROUP BY change_id`) {
		var id string
		var n int64
		_, err := fmt.Sscan(s, &id, &n)
		require.NoError(t, err)
		gotOutcomes[id] = n
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
}
