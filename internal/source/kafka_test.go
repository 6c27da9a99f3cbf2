package source

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/idem-dev/idem/internal/catalog"
	"github.com/idem-dev/idem/internal/job"
	"github.com/idem-dev/idem/internal/report"
)

// kafkaFixture is an in-process cluster (kfake speaks the real protocol)
// holding topic "t", and a producer for it.
type kafkaFixture struct {
	t    *testing.T
	addr string
	cl   *kgo.Client
	c    *kfake.Cluster
}

func newKafkaFixture(t *testing.T, partitions int32) *kafkaFixture {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(partitions, "t"))
	require.NoError(t, err)
	t.Cleanup(c.Close)
	addr := c.ListenAddrs()[0]
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(0))
	require.NoError(t, err)
	t.Cleanup(cl.Close)
	return &kafkaFixture{t: t, addr: addr, cl: cl, c: c}
}

// produce writes n records to partition p, valued "p<p>-<i>" from i = from.
func (f *kafkaFixture) produce(p int32, from, n int) {
	f.t.Helper()
	var recs []*kgo.Record
	for i := from; i < from+n; i++ {
		recs = append(recs, &kgo.Record{Topic: "t", Partition: p, Value: fmt.Appendf(nil, "p%d-%d", p, i)})
	}
	require.NoError(f.t, f.cl.ProduceSync(context.Background(), recs...).FirstErr())
}

// deleteBefore deletes partition p's records below offset, as retention
// does.
func (f *kafkaFixture) deleteBefore(p int32, offset int64) {
	f.t.Helper()
	req := kmsg.NewPtrDeleteRecordsRequest()
	rt := kmsg.NewDeleteRecordsRequestTopic()
	rt.Topic = "t"
	rp := kmsg.NewDeleteRecordsRequestTopicPartition()
	rp.Partition, rp.Offset = p, offset
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	req.TimeoutMillis = 5000
	resp, err := req.RequestWith(context.Background(), f.cl)
	require.NoError(f.t, err)
	require.Zero(f.t, resp.Topics[0].Partitions[0].ErrorCode)
}

func (f *kafkaFixture) reader(start string) *KafkaReader {
	f.t.Helper()
	spec := job.StreamSpec{Kind: job.KindKafka, Brokers: []string{f.addr}, Topic: "t", MaxWait: 200 * time.Millisecond, Start: start}
	r, err := NewKafkaReader(spec)
	require.NoError(f.t, err)
	f.t.Cleanup(func() { r.Close() })
	return r
}

// values lists the records as "partition:position=value", sorted.
func values(recs []Record) []string {
	out := make([]string, len(recs))
	for i, r := range recs {
		out[i] = fmt.Sprintf("%s:%d=%s", r.Partition, r.Position, r.Value)
	}
	slices.Sort(out)
	return out
}

// readAll reads until a Read returns nothing, from next, advancing it.
func readAll(t *testing.T, r *KafkaReader, next map[string]int64, max int) []Record {
	t.Helper()
	var all []Record
	for {
		recs, gaps, err := r.Read(context.Background(), next, max, time.Second)
		require.NoError(t, err)
		require.Empty(t, gaps)
		require.LessOrEqual(t, len(recs), max)
		if len(recs) == 0 {
			return all
		}
		for _, rec := range recs {
			next[rec.Partition] = rec.Position + 1
		}
		all = append(all, recs...)
	}
}

// TestKafkaRead: every record of every partition once, at most max a Read,
// from the earliest offset of a partition never read; a Read that has
// records and is caught up returns before maxWait; Ends are the log ends.
func TestKafkaRead(t *testing.T) {
	t.Parallel()
	f := newKafkaFixture(t, 3)
	f.produce(0, 0, 5)
	f.produce(1, 0, 3)
	f.produce(2, 0, 4)
	r := f.reader("")
	began := time.Now()
	recs, gaps, err := r.Read(context.Background(), nil, 100, 10*time.Second)
	require.NoError(t, err)
	require.Empty(t, gaps)
	require.Less(t, time.Since(began), 5*time.Second, "caught up: no wait for maxWait")
	for len(recs) < 12 { // a poll may give some partitions first
		more, _, err := r.Read(context.Background(), nextOf(recs), 100, time.Second)
		require.NoError(t, err)
		require.NotEmpty(t, more)
		recs = append(recs, more...)
	}
	require.Len(t, recs, 12)
	require.Equal(t, "0:4=p0-4", values(recs)[4])
	require.Equal(t, map[string]int64{"0": 5, "1": 3, "2": 4}, r.Ends(context.Background()))

	// max bounds a Read; the next Read goes on from where it stopped.
	r2 := f.reader("")
	got := readAll(t, r2, map[string]int64{}, 2)
	require.Equal(t, values(recs), values(got))
}

// nextOf is the next position per partition after recs.
func nextOf(recs []Record) map[string]int64 {
	next := map[string]int64{}
	for _, r := range recs {
		next[r.Partition] = r.Position + 1
	}
	return next
}

// TestKafkaReadFromNext: a Read starts each partition at next; a Read from
// an earlier next (a batch rolled back) reads the records again.
func TestKafkaReadFromNext(t *testing.T) {
	t.Parallel()
	f := newKafkaFixture(t, 2)
	f.produce(0, 0, 6)
	f.produce(1, 0, 6)
	r := f.reader("")
	got := readAll(t, r, map[string]int64{"0": 4, "1": 5}, 100)
	require.Equal(t, []string{"0:4=p0-4", "0:5=p0-5", "1:5=p1-5"}, values(got))

	again := readAll(t, r, map[string]int64{"0": 3, "1": 5}, 100)
	require.Equal(t, []string{"0:3=p0-3", "0:4=p0-4", "0:5=p0-5", "1:5=p1-5"}, values(again))

	f.produce(1, 6, 2)
	more := readAll(t, r, map[string]int64{"0": 6, "1": 6}, 100)
	require.Equal(t, []string{"1:6=p1-6", "1:7=p1-7"}, values(more))
}

// TestKafkaReadStartLatest: with start = "latest" a partition without a
// next position starts at its end at each Read, so the records already in
// it never come; one with a next position starts there.
func TestKafkaReadStartLatest(t *testing.T) {
	t.Parallel()
	f := newKafkaFixture(t, 1)
	f.produce(0, 0, 3)
	r := f.reader(job.StartLatest)
	recs, gaps, err := r.Read(context.Background(), nil, 100, 300*time.Millisecond)
	require.NoError(t, err)
	require.Empty(t, gaps)
	require.Empty(t, recs)
	f.produce(0, 3, 2)
	got := readAll(t, r, map[string]int64{"0": 3}, 100)
	require.Equal(t, []string{"0:3=p0-3", "0:4=p0-4"}, values(got))
	require.Empty(t, readAll(t, r, map[string]int64{}, 100))
}

// TestKafkaReadStartLatestPinsOnce: start = "latest" starts every
// partition at its log end on the job's first read only (Starts names the
// positions chosen); a partition without a position on a later read (one
// added to the topic) starts at its first record, so none is lost.
func TestKafkaReadStartLatestPinsOnce(t *testing.T) {
	t.Parallel()
	f := newKafkaFixture(t, 2)
	f.produce(0, 0, 3)
	f.produce(1, 0, 2)
	r := f.reader(job.StartLatest)
	recs, _, err := r.Read(context.Background(), nil, 100, 300*time.Millisecond)
	require.NoError(t, err)
	require.Empty(t, recs)
	require.Equal(t, map[string]int64{"0": 3, "1": 2}, r.Starts())
	recs, _, err = r.Read(context.Background(), map[string]int64{"0": 3}, 100, time.Second)
	require.NoError(t, err)
	require.Equal(t, []string{"1:0=p1-0", "1:1=p1-1"}, values(recs), "a partition without a position after the first read starts at its first record")
	require.Equal(t, map[string]int64{"1": 0}, r.Starts())
}

// TestKafkaReadGap: records deleted below next are a Gap from next to the
// first offset the partition holds, and the Read goes on from there.
func TestKafkaReadGap(t *testing.T) {
	t.Parallel()
	f := newKafkaFixture(t, 1)
	f.produce(0, 0, 10)
	f.deleteBefore(0, 7)
	r := f.reader("")
	recs, gaps, err := r.Read(context.Background(), map[string]int64{"0": 4}, 100, time.Second)
	require.NoError(t, err)
	require.Equal(t, []Gap{{Partition: "0", From: 4, Next: 7}}, gaps)
	require.Equal(t, []string{"0:7=p0-7", "0:8=p0-8", "0:9=p0-9"}, values(recs))
}

// TestKafkaReadLogEndBelowPosition: a partition whose log ends below the
// committed position (the topic recreated with fewer records) is refused
// with exit 3 naming topic, partition and offsets, and nothing is read.
func TestKafkaReadLogEndBelowPosition(t *testing.T) {
	t.Parallel()
	f := newKafkaFixture(t, 1)
	f.produce(0, 0, 4)
	r := f.reader("")
	recs, gaps, err := r.Read(context.Background(), map[string]int64{"0": 10}, 100, time.Second)
	require.Error(t, err)
	require.Equal(t, report.ExitRefused, report.ExitCode(err))
	require.Contains(t, err.Error(), `kafka topic "t" partition 0: the log ends at offset 4, below the position 10 this job committed`)
	require.Empty(t, recs)
	require.Empty(t, gaps)
}

// TestKafkaReadContext: a Read whose ctx ends with nothing read returns
// ctx's error.
func TestKafkaReadContext(t *testing.T) {
	t.Parallel()
	f := newKafkaFixture(t, 1)
	r := f.reader("")
	_, _, err := r.Read(context.Background(), nil, 10, 100*time.Millisecond)
	require.NoError(t, err) // connected, nothing to read
	ctx, cancel := context.WithCancel(context.Background())
	go func() { time.Sleep(100 * time.Millisecond); cancel() }()
	recs, _, err := r.Read(ctx, map[string]int64{"0": 0}, 10, 10*time.Second)
	require.ErrorIs(t, err, context.Canceled)
	require.Empty(t, recs)
}

// countingConn counts the bytes a client reads from a broker.
type countingConn struct {
	net.Conn
	n *atomic.Int64
}

func (c countingConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	c.n.Add(int64(n))
	return n, err
}

// TestKafkaReadTooLarge: a message past max_record_bytes is a record too
// large, its value cut to its first bytes, and the records around it are
// read: one the client can read is cut as it arrives; one whose record
// batch is past the largest response the client reads (max(R, 1 MiB) +
// 64 KiB) is found by a one-partition fetch and never read (the bytes read
// from the broker stay far below it); one that decompresses past its bound
// gives each offset of its batch as too large (its length as the bound
// plus one: it is not known). The client's limits are
// the bounds the README names.
func TestKafkaReadTooLarge(t *testing.T) {
	t.Parallel()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "t"), kfake.BrokerConfigs(map[string]string{"message.max.bytes": strconv.Itoa(64 << 20)}))
	require.NoError(t, err)
	t.Cleanup(c.Close)
	addr := c.ListenAddrs()[0]
	producer := func(opts ...kgo.Opt) *kgo.Client {
		cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr), kgo.ProducerLinger(0), kgo.ProducerBatchMaxBytes(100 << 20), kgo.BrokerMaxWriteBytes(200 << 20)}, opts...)...)
		require.NoError(t, err)
		t.Cleanup(cl.Close)
		return cl
	}
	plain, lz4 := producer(kgo.ProducerBatchCompression(kgo.NoCompression())), producer(kgo.ProducerBatchCompression(kgo.Lz4Compression()))
	produce := func(cl *kgo.Client, values ...[]byte) {
		t.Helper()
		for _, v := range values { // one batch each
			require.NoError(t, cl.ProduceSync(context.Background(), &kgo.Record{Topic: "t", Value: v}).FirstErr())
		}
	}
	mid := bytes.Repeat([]byte("m"), 200<<10) // read, past R
	big := bytes.Repeat([]byte("b"), 8<<20)   // its batch past the largest response
	huge := make([]byte, 65<<20)              // compresses to little, decompresses past 64 MiB
	produce(plain, []byte("s0"), mid, []byte("s1"), big, []byte("s2"))
	produce(lz4, huge)
	produce(plain, []byte("s3"))
	huge = nil

	var read atomic.Int64
	dial := func(ctx context.Context, network, host string) (net.Conn, error) {
		conn, err := (&net.Dialer{}).DialContext(ctx, network, host)
		if err != nil {
			return nil, err
		}
		return countingConn{Conn: conn, n: &read}, nil
	}
	spec := job.StreamSpec{Kind: job.KindKafka, Brokers: []string{addr}, Topic: "t", MaxWait: 200 * time.Millisecond, MaxRecordBytes: 64 << 10}
	// The decompression bound, 64 MiB here, lowered to 4 MiB to keep the
	// test cheap.
	r, err := NewKafkaReader(spec, kgo.Dialer(dial), kgo.MaxDecompressBatchBytes(4<<20))
	require.NoError(t, err)
	t.Cleanup(func() { r.Close() })
	require.Equal(t, kafkaBounds{fetch: 1 << 20, response: 1<<20 + 64<<10, decompress: 64 << 20}, r.bounds())

	var got []string
	for _, rec := range readAll(t, r, map[string]int64{}, 10) {
		got = append(got, fmt.Sprintf("%d %q %d", rec.Position, rec.Value, rec.Oversize))
	}
	require.Len(t, got, 7)
	require.Equal(t, []string{`0 "s0" 0`, fmt.Sprintf("1 %q %d", mid[:catalog.RejectPrefix], len(mid)), `2 "s1" 0`}, got[:3])
	var n int
	_, err = fmt.Sscanf(got[3], `3 "" %d`, &n)
	require.NoError(t, err, got[3])
	require.Greater(t, n, len(big), "the size of the response that holds it")
	require.Equal(t, []string{`4 "s2" 0`, fmt.Sprintf(`5 "" %d`, 64<<20+1), `6 "s3" 0`}, got[4:])
	require.Less(t, read.Load(), int64(2<<20), "bytes read from the broker: the 8 MiB record was never read")

	// A job's bounds follow max_record_bytes.
	for _, c := range []struct {
		r    int
		want kafkaBounds
	}{
		{0, kafkaBounds{fetch: 8 << 20, response: 8<<20 + 64<<10, decompress: 64 << 20}},
		{32 << 20, kafkaBounds{fetch: 32 << 20, response: 32<<20 + 64<<10, decompress: 256 << 20}},
		{2 << 30, kafkaBounds{fetch: 1<<30 - 64<<10, response: 1 << 30, decompress: 1 << 30}},
	} {
		require.Equal(t, c.want, (&KafkaReader{spec: job.StreamSpec{MaxRecordBytes: c.r}}).bounds(), "max_record_bytes %d", c.r)
	}
}
