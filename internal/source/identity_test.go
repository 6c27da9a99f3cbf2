package source

import (
	"context"
	"encoding/hex"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/idem-dev/idem/internal/catalog"
	"github.com/idem-dev/idem/internal/report"
)

// TestReadStreamBatchTopicRecreatedDuringRead: a topic deleted and
// recreated after a batch checked its ID, and before the read listed the
// partitions' offsets, is the new log whatever its offsets. Without
// --allow-gap the batch is refused as another log, naming both IDs and the
// positions (not as a log that ends below the position, a refusal
// --allow-gap cannot pass); with it the new topic is read from its first
// record, under its own batch name. The new topic's records at or past the
// old positions are never taken for the old topic's next records, which
// would lose the ones below them without a word.
func TestReadStreamBatchTopicRecreatedDuringRead(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name     string
		records  int // in the new topic when the read lists its offsets; the old positions are at 5
		allowGap bool
		id       string // the batch id; %s is the new topic ID's first 12 digits
		next     int64
	}{
		{name: "smaller, refused", records: 2},
		{name: "smaller, --allow-gap", records: 2, allowGap: true, id: "t@%s:0:0-1", next: 2},
		{name: "empty, --allow-gap", allowGap: true, id: "t@%s:reset", next: 0},
		{name: "larger, refused", records: 8},
		{name: "larger, --allow-gap", records: 8, allowGap: true, id: "t@%s:0:0-7", next: 8},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			f := newKafkaFixture(t, 1)
			f.produce(0, 0, 5)
			oldID := hex.EncodeToString(f.c.TopicInfo("t").TopicID[:])
			db, err := open(ctx, "")
			require.NoError(t, err)
			t.Cleanup(func() { db.Close() })
			require.NoError(t, catalog.Migrate(ctx, db, "memory", nil))
			_, err = db.ExecContext(ctx, `INSERT INTO idem.snapshots (job, snapshot, parent, kind, inputs) VALUES ('j', 1, 0, 'apply', ?)`, `{"stream_id":"`+oldID+`"}`)
			require.NoError(t, err)
			require.NoError(t, catalog.WritePositions(ctx, db, "j", map[string]int64{"0": 5}, 1))

			// The first ListOffsets of the read (after the ID check) finds
			// the topic recreated, holding c.records records.
			var once atomic.Bool
			f.c.ControlKey(int16(kmsg.ListOffsets), func(kmsg.Request) (kmsg.Response, error, bool) {
				if !once.CompareAndSwap(false, true) {
					return nil, nil, false
				}
				f.c.DropControl()
				require.NoError(t, f.c.DeleteTopic("t"))
				require.NoError(t, f.c.CreateTopic("t", 1, nil))
				if c.records > 0 {
					// Other connections are served while this request
					// sleeps: a new producer fills the new topic.
					f.c.SleepControl(func() {
						cl, err := kgo.NewClient(kgo.SeedBrokers(f.addr), kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(0))
						if err != nil {
							panic(err)
						}
						defer cl.Close()
						var recs []*kgo.Record
						for i := range c.records {
							recs = append(recs, &kgo.Record{Topic: "t", Value: fmt.Appendf(nil, `{"change_id":"n%d"}`, i)})
						}
						if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
							panic(err)
						}
					})
				}
				return nil, nil, false
			})
			j := loadTestJob(t, "versioned_changes")
			j.Name = "j"
			j.Input.Stream.Brokers = []string{f.addr}
			r, err := NewKafkaReader(j.Input.Stream)
			require.NoError(t, err)
			t.Cleanup(func() { r.Close() })
			b, err := ReadStreamBatch(ctx, db, j, r, t.TempDir(), c.allowGap)
			require.True(t, once.Load(), "the topic was recreated during the read")
			newID := hex.EncodeToString(f.c.TopicInfo("t").TopicID[:])
			require.NotEqual(t, oldID, newID)
			if !c.allowGap {
				require.Error(t, err)
				require.Equal(t, report.ExitRefused, report.ExitCode(err))
				require.Contains(t, err.Error(), fmt.Sprintf(`kafka topic "t" is another log than the one job j read: its topic ID is %s, and the positions 0@5 were committed from topic ID %s`, newID, oldID))
				return
			}
			require.NoError(t, err)
			defer b.Remove()
			require.Equal(t, fmt.Sprintf(c.id, newID[:12]), b.ID)
			require.Equal(t, newID, b.StreamID)
			require.Equal(t, fmt.Sprintf("topic recreated (--allow-gap): topic ID %s, not %s; positions 0@5 left for the new topic's first records (records of the old topic past them or in a partition without a position, if any, and of any topic created and deleted in between, were not read)", newID, oldID), b.Reset)
			require.Equal(t, c.records, b.Records)
			require.Equal(t, map[string]int64{"0": c.next}, b.Next)
		})
	}
}

// TestKafkaReadAcrossRecreate: a reader whose client was consuming a topic
// deleted and recreated under the same name reads the new topic's records
// on its next Read, even from the same offsets (the client would refuse
// to adopt the new topic ID and read nothing).
func TestKafkaReadAcrossRecreate(t *testing.T) {
	t.Parallel()
	f := newKafkaFixture(t, 1)
	f.produce(0, 0, 2)
	r := f.reader("")
	recs, _, err := r.Read(context.Background(), map[string]int64{}, 100, 5*time.Second)
	require.NoError(t, err)
	require.Equal(t, []string{"0:0=p0-0", "0:1=p0-1"}, values(recs))
	require.NoError(t, f.c.DeleteTopic("t"))
	require.NoError(t, f.c.CreateTopic("t", 1, nil))
	cl, err := kgo.NewClient(kgo.SeedBrokers(f.addr), kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(0))
	require.NoError(t, err)
	defer cl.Close()
	f.cl = cl
	f.produce(0, 0, 3)
	recs, _, err = r.Read(context.Background(), map[string]int64{"0": 2}, 100, 5*time.Second)
	require.NoError(t, err)
	require.Equal(t, []string{"0:2=p0-2"}, values(recs))
}
