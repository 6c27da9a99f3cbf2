package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// The stream case (issue 44): streamRecords versioned_changes records
// into streamRecords/4+1 entities, applied by `idem run --follow` from a
// Kafka topic of three partitions in batches of streamBatch records (the
// follower stops at its last batch, --max-batches, so its time holds its
// closing checkpoint and no idle wait), against `idem run` of the same
// records as one JSON Lines file. Both are whole idem processes on a fresh
// database, so their CPU compares like with like; the broker (kfake) runs
// in this process, outside the follower's CPU, as a broker would. After
// the repetitions both targets must hold the same rows and the follower's
// committed positions the whole topic, or the case fails.

const (
	streamRecords    = 100000
	streamBatch      = 10000
	streamPartitions = 3
)

// streamRecord is record i: a change of entity e<i % entities> at version
// i+1 (the records of cmd/idem/cli/streamtest's throughput test).
func streamRecord(i, entities int) []byte {
	e := i % entities
	return fmt.Appendf(nil, `{"change_id":"c%d","entity_id":"e%d","source_version":%d,"operation":"upsert","value":"v%d"}`, i, e, i+1, i)
}

// streamJobHead is both jobs' head; %d is the transform version
// (-stream-transform: 2, what a new project gets, or 1, the released v1).
const streamJobHead = `name = "rides"
pipeline = "versioned_changes"
transform_version = %d
schema_version = 1
database = "unused.duckdb"
`

func (b *bench) streamCase(ctx context.Context) error {
	dir := filepath.Join(b.dir, "stream")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(streamPartitions, "rides"))
	if err != nil {
		return fmt.Errorf("start kfake: %w", err)
	}
	defer c.Close()
	addr := c.ListenAddrs()[0]
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(0))
	if err != nil {
		return err
	}
	defer cl.Close()
	entities := streamRecords/4 + 1
	var file strings.Builder
	recs := make([]*kgo.Record, 0, 1000)
	for i := range streamRecords {
		v := streamRecord(i, entities)
		file.Write(v)
		file.WriteByte('\n')
		recs = append(recs, &kgo.Record{Topic: "rides", Partition: int32(i % entities % streamPartitions), Value: v})
		if len(recs) == cap(recs) || i == streamRecords-1 {
			if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
				return fmt.Errorf("produce: %w", err)
			}
			recs = recs[:0]
		}
	}
	input := filepath.Join(dir, "all.jsonl")
	streamJob, fileJob := filepath.Join(dir, "stream.toml"), filepath.Join(dir, "file.toml")
	head := fmt.Sprintf(streamJobHead, b.streamTransform)
	for p, text := range map[string]string{
		input:     file.String(),
		streamJob: head + fmt.Sprintf("[input]\nkind = \"kafka\"\nbrokers = [%q]\ntopic = \"rides\"\nmax_records = %d\nmax_wait = \"300ms\"\n[target]\ntable = \"rides\"\n", addr, streamBatch),
		fileJob:   head + fmt.Sprintf("[input]\npath = %q\nformat = \"jsonl\"\n[target]\ntable = \"rides\"\n", input),
	} {
		if err := writeFile(p, text); err != nil {
			return err
		}
	}
	batches := (streamRecords + streamBatch - 1) / streamBatch
	followDB, fileDB := filepath.Join(dir, "follow.duckdb"), filepath.Join(dir, "file.duckdb")
	r := &row{name: fmt.Sprintf("run --follow, %d batches of %d from Kafka (kfake), transform v%d", batches, streamBatch, b.streamTransform), n: streamRecords, limit: "none",
		floorName: fmt.Sprintf("idem run of one JSONL file of %d", streamRecords)}
	runFollow := func(int) (measure, error) {
		removeDB(followDB)
		return runChild(ctx, "", b.idem, "run", streamJob, "--db", followDB, "--follow", "--max-batches", fmt.Sprint(batches), "--idle-exit", "5s", "--quiet")
	}
	runFile := func(int) (measure, error) {
		removeDB(fileDB)
		return runChild(ctx, "", b.idem, "run", fileJob, "--db", fileDB, "--quiet")
	}
	if err := b.pair(ctx, r, runFollow, runFile); err != nil {
		return err
	}
	if err := compareBy(ctx, "fingerprint", followDB, fileDB, []struct{ what, q string }{{"target", "SELECT * FROM rides"}}); err != nil {
		return err
	}
	db, err := openRO(followDB)
	if err != nil {
		return err
	}
	defer db.Close()
	var next, runs int64
	if err := db.QueryRowContext(ctx, "SELECT sum(next) FROM idem.positions").Scan(&next); err != nil {
		return fmt.Errorf("read the follower's positions: %w", err)
	}
	if next != streamRecords {
		return fmt.Errorf("the follower committed positions up to %d records, not %d", next, streamRecords)
	}
	if err := db.QueryRowContext(ctx, "SELECT count(*) FROM idem.snapshots").Scan(&runs); err != nil {
		return fmt.Errorf("count the follower's snapshots: %w", err)
	}
	ratios := make([]float64, len(r.idem))
	for i := range r.idem {
		ratios[i] = r.floor[i].wall.Seconds() / r.idem[i].wall.Seconds()
	}
	m, lo, hi := medianMinMax(ratios)
	b.rows[len(b.rows)-1].note = fmt.Sprintf("%d snapshots committed by the follower; records/s of --follow / of one file: %.2fx (%.2f-%.2f), goal 0.6x", runs, m, lo, hi)
	removeDB(followDB)
	removeDB(fileDB)
	return nil
}
