package source

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/idem-dev/idem/internal/catalog"
	"github.com/idem-dev/idem/internal/job"
	"github.com/idem-dev/idem/internal/report"
)

// KafkaReader reads a Kafka topic's partitions directly at explicit
// offsets (no consumer group: idem's own positions are the truth). Its
// source partitions are the topic's partition numbers, its positions the
// records' offsets. A gap is a partition whose log start offset is above
// the position asked for (retention deleted records idem had not read); a
// partition whose log ends below it is refused (exit 3): the topic was
// recreated or truncated.
type KafkaReader struct {
	spec job.StreamSpec
	opts []kgo.Opt

	mu  sync.Mutex
	cl  *kgo.Client
	pos map[int32]int64 // the offset the client delivers next, per partition
	// clTopic is the topic ID the last metadata said when cl was made:
	// franz-go never adopts a recreated topic's new ID, so a client made
	// before a recreate reads nothing of the new topic.
	clTopic [16]byte
	ends    map[string]int64
	// starts are the offsets the last Read chose for partitions without
	// a committed position.
	starts map[string]int64
	// leaders and topicID are what the last metadata said, for the
	// one-partition fetches of probeTooLarge.
	leaders map[int32]int32
	topicID [16]byte
}

// NewKafkaReader returns the reader of a kafka [input]; it connects on the
// first Read. extra options are for tests.
func NewKafkaReader(spec job.StreamSpec, extra ...kgo.Opt) (*KafkaReader, error) {
	if spec.Kind != job.KindKafka || spec.Topic == "" || len(spec.Brokers) == 0 {
		return nil, errors.New("kafka reader: needs brokers and a topic")
	}
	return &KafkaReader{spec: spec, opts: extra, ends: map[string]int64{}}, nil
}

// Close closes the client.
func (k *KafkaReader) Close() error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.cl != nil {
		k.cl.Close()
		k.cl = nil
	}
	return nil
}

// Starts returns the offsets the last Read chose for the partitions it had
// no committed position for.
func (k *KafkaReader) Starts() map[string]int64 {
	k.mu.Lock()
	defer k.mu.Unlock()
	return maps.Clone(k.starts)
}

// Ends returns the high watermark of each partition as last seen.
func (k *KafkaReader) Ends(context.Context) map[string]int64 {
	k.mu.Lock()
	defer k.mu.Unlock()
	out := make(map[string]int64, len(k.ends))
	for p, e := range k.ends {
		out[p] = e
	}
	return out
}

// Read implements StreamReader. It returns early, before maxWait, once it
// has records and every partition is read up to its high watermark.
func (k *KafkaReader) Read(ctx context.Context, next map[string]int64, max int, maxWait time.Duration) ([]Record, []Gap, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	deadline := time.Now().Add(maxWait)
	want, gaps, err := k.plan(ctx, next)
	if err != nil {
		return nil, nil, err
	}
	if err := k.seek(want); err != nil {
		return nil, nil, err
	}
	out, err := k.poll(ctx, max, deadline)
	if err != nil {
		return nil, gaps, err
	}
	return out, gaps, nil
}

// plan lists the topic's partitions and their first and end offsets, and
// returns the offset to read each from: next, or where a partition never
// read starts ([input] start), or its first offset when retention deleted
// records at or past next (a gap). It records the end offsets in k.ends.
func (k *KafkaReader) plan(ctx context.Context, next map[string]int64) (map[int32]int64, []Gap, error) {
	admin := k.cl
	if admin == nil {
		cl, err := kgo.NewClient(k.clientOpts(nil)...)
		if err != nil {
			return nil, nil, fmt.Errorf("kafka %v: %w", k.spec.Brokers, err)
		}
		defer cl.Close()
		admin = cl
	}
	parts, err := k.partitions(ctx, admin)
	if err == nil && len(parts) == 0 {
		err = fmt.Errorf("topic %q has no partitions", k.spec.Topic)
	}
	var first, last map[int32]int64
	if err == nil {
		first, err = k.listOffsets(ctx, admin, parts, -2)
	}
	if err == nil {
		last, err = k.listOffsets(ctx, admin, parts, -1)
	}
	if err != nil {
		return nil, nil, err
	}
	want := map[int32]int64{}
	var gaps []Gap
	k.starts = map[string]int64{}
	for _, p := range parts {
		name := strconv.Itoa(int(p))
		k.ends[name] = last[p]
		n, ok := next[name]
		switch {
		case !ok && k.spec.Start == job.StartLatest && len(next) == 0:
			// The job's first read: every partition from its log end, and
			// the batch commits those positions even if it reads nothing.
			want[p] = last[p]
			k.starts[name] = last[p]
		case !ok:
			// A partition never read (one added to the topic later): from
			// its first record, so none produced before it was seen is lost.
			want[p] = first[p]
			k.starts[name] = first[p]
		case last[p] < n:
			// A log never shrinks: one that ends below what this job
			// committed is another log under the same name (the topic was
			// deleted and recreated) or was truncated. Its offsets below n
			// would be taken for records already read.
			return nil, nil, report.Refuse("stream", "kafka topic %q partition %d: the log ends at offset %d, below the position %d this job committed: the topic was deleted and recreated, or truncated, and its records at offsets below %d would be taken for records already read; nothing was read. To read the new topic, give the job a new name (a new position) or its own database",
				k.spec.Topic, p, last[p], n, n)
		case first[p] > n:
			gaps = append(gaps, Gap{Partition: name, From: n, Next: first[p]})
			want[p] = first[p]
		default:
			want[p] = n
		}
	}
	return want, gaps, nil
}

// seek makes k.cl a client that delivers each partition from want.
func (k *KafkaReader) seek(want map[int32]int64) error {
	if k.cl != nil && (!maps64Equal(k.pos, want) || k.clTopic != k.topicID) {
		// The client would deliver from elsewhere (a batch rolled back, a
		// replay), or from a topic since deleted: start a fresh client
		// rather than mix its buffered records with the new offsets.
		k.cl.Close()
		k.cl = nil
	}
	if k.cl != nil {
		return nil
	}
	offsets := map[int32]kgo.Offset{}
	for p, o := range want {
		offsets[p] = kgo.NewOffset().At(o)
	}
	cl, err := kgo.NewClient(k.clientOpts(map[string]map[int32]kgo.Offset{k.spec.Topic: offsets})...)
	if err != nil {
		return fmt.Errorf("kafka %v: %w", k.spec.Brokers, err)
	}
	k.cl, k.pos, k.clTopic = cl, want, k.topicID
	return nil
}

// poll reads at most max records until deadline, or until it has some and
// every partition is caught up. A fetch error with nothing read, or ctx
// ending with nothing read, is returned; with records read, they are. An
// offset out of range returns what was read and drops the client, so the
// next Read lists the offsets again and reports the gap.
func (k *KafkaReader) poll(ctx context.Context, max int, deadline time.Time) ([]Record, error) {
	var out []Record
	for len(out) < max {
		if len(out) > 0 && k.caughtUp() {
			break
		}
		wait := time.Until(deadline)
		if wait <= 0 {
			break
		}
		pctx, cancel := context.WithTimeout(ctx, wait)
		fetches := k.cl.PollRecords(pctx, max-len(out))
		cancel()
		var ferr error
		out, ferr = k.take(fetches, out)
		if errors.Is(ferr, errResponseTooLarge) {
			// A record batch past what the client reads: find it with
			// one-partition fetches, and give its first record as one
			// too large; the next Read goes on after it.
			rec, ok, err := k.probeTooLarge(ctx)
			if err != nil || !ok {
				k.cl.Close()
				k.cl = nil
				if len(out) > 0 {
					return out, nil
				}
				return nil, errors.Join(ferr, err)
			}
			ferr = errReseek
			out = append(out, rec)
		}
		if errors.Is(ferr, errOutOfRange) || errors.Is(ferr, errReseek) {
			k.cl.Close()
			k.cl = nil
			return out, nil
		}
		if ferr != nil {
			if len(out) > 0 {
				break
			}
			k.cl.Close()
			k.cl = nil
			return nil, ferr
		}
		if ctx.Err() != nil {
			if len(out) == 0 {
				return nil, ctx.Err()
			}
			break
		}
	}
	return out, nil
}

// take appends the records of fetches to out, advancing k.pos and k.ends,
// and returns the first fetch error: errOutOfRange when retention deleted
// records after this Read listed the partitions' first offsets,
// errResponseTooLarge when a fetch response was past BrokerMaxReadBytes,
// errReseek after a record batch that decompresses past its bound (each
// of its offsets is a record too large, and the client, which stopped
// reading the partition, must start again past it). A fetch cut by the
// poll's deadline is no error. A value past max_record_bytes is cut to
// its first bytes, and the others are copied, so that no fetch response
// outlives the poll.
func (k *KafkaReader) take(fetches kgo.Fetches, out []Record) ([]Record, error) {
	var ferr error
	keep := func(err error) {
		if ferr == nil || errors.Is(err, errResponseTooLarge) {
			ferr = err
		}
	}
	limit := k.maxRecordBytes()
	fetches.EachError(func(_ string, p int32, err error) {
		var big *kgo.ErrDecompressTooLarge
		switch {
		case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		case errors.Is(err, kerr.OffsetOutOfRange):
			keep(errOutOfRange)
		case errors.As(err, &big):
			for o := max(big.Offset, k.pos[p]); o < big.NextOffset; o++ {
				out = append(out, Record{Partition: strconv.Itoa(int(p)), Position: o, Oversize: k.bounds().decompress + 1})
			}
			if k.pos[p] < big.NextOffset {
				k.pos[p] = big.NextOffset
			}
			keep(errReseek)
		case strings.Contains(err.Error(), responseTooLarge):
			keep(errResponseTooLarge)
		default:
			keep(fmt.Errorf("kafka fetch %s[%d]: %w", k.spec.Topic, p, err))
		}
	})
	fetches.EachPartition(func(fp kgo.FetchTopicPartition) {
		if fp.HighWatermark > 0 {
			k.ends[strconv.Itoa(int(fp.Partition))] = fp.HighWatermark
		}
		for _, r := range fp.Records {
			rec := Record{Partition: strconv.Itoa(int(r.Partition)), Position: r.Offset, Null: r.Value == nil, Key: bytes.Clone(r.Key)}
			if len(r.Value) > limit {
				rec.Value, rec.Oversize = bytes.Clone(r.Value[:catalog.RejectPrefix]), len(r.Value)
			} else if r.Value != nil {
				rec.Value = bytes.Clone(r.Value)
			}
			out = append(out, rec)
			k.pos[r.Partition] = r.Offset + 1
		}
	})
	return out, ferr
}

var (
	errOutOfRange       = errors.New("offset out of range")
	errReseek           = errors.New("start the client again past a record batch too large")
	errResponseTooLarge = errors.New("a fetch response past the bytes idem reads")
)

// responseTooLarge is how franz-go's error of a response past
// BrokerMaxReadBytes reads (its sentinel is unexported);
// TestKafkaReadTooLarge fails if it changes.
const responseTooLarge = "response exceeds BrokerMaxReadBytes"

// kafkaBounds are what one read of a Kafka topic may hold (see
// KafkaReader.bounds).
type kafkaBounds struct {
	fetch      int32 // FetchMaxBytes and FetchMaxPartitionBytes
	response   int32 // BrokerMaxReadBytes: the largest response read
	decompress int   // MaxDecompressBatchBytes: one record batch, decompressed
}

// bounds derives the client's byte limits from max_record_bytes (R): a
// fetch asks for at most F = max(R, 1 MiB) (a broker still sends a first
// record batch larger than that, so that a reader makes progress), the
// client reads no response past F + 64 KiB, room for a batch holding one
// record of R bytes and the response's headers, and decompresses no record
// batch past max(8F, 64 MiB). A response past its bound is not read: its
// record batch is found by probeTooLarge.
func (k *KafkaReader) bounds() kafkaBounds {
	const maxRead = 1 << 30 // franz-go's ceiling
	f := int64(max(k.maxRecordBytes(), 1<<20))
	f = min(f, maxRead-64<<10)
	return kafkaBounds{fetch: int32(f), response: int32(f + 64<<10), decompress: int(min(max(8*f, 64<<20), maxRead))}
}

func (k *KafkaReader) maxRecordBytes() int {
	if k.spec.MaxRecordBytes > 0 {
		return k.spec.MaxRecordBytes
	}
	return job.DefaultMaxRecordBytes
}

// probeTooLarge finds the partition whose next record batch is past what
// the client reads, fetching each partition alone from its next offset:
// the record at that offset is returned as one too large (its length is
// the response's, a little more than the batch's), and is never read.
// ok is false when no partition's fetch is too large (the batch moved:
// retention, or a leader change).
func (k *KafkaReader) probeTooLarge(ctx context.Context) (Record, bool, error) {
	if _, _, err := k.metadata(ctx, k.cl); err != nil {
		return Record{}, false, err
	}
	for _, p := range slices.Sorted(maps.Keys(k.pos)) {
		req := kmsg.NewPtrFetchRequest()
		req.ReplicaID, req.MaxWaitMillis, req.MinBytes, req.MaxBytes = -1, 0, 1, 1
		t := kmsg.NewFetchRequestTopic()
		t.Topic, t.TopicID = k.spec.Topic, k.topicID
		fp := kmsg.NewFetchRequestTopicPartition()
		fp.Partition, fp.FetchOffset, fp.PartitionMaxBytes, fp.CurrentLeaderEpoch, fp.LogStartOffset = p, k.pos[p], 1, -1, -1
		t.Partitions = append(t.Partitions, fp)
		req.Topics = append(req.Topics, t)
		leader, ok := k.leaders[p]
		if !ok {
			continue
		}
		_, err := k.cl.Broker(int(leader)).RetriableRequest(ctx, req)
		if err == nil || !strings.Contains(err.Error(), responseTooLarge) {
			continue
		}
		size := int(k.bounds().response) + 1
		var n, limit int
		if _, serr := fmt.Sscanf(err.Error()[strings.Index(err.Error(), "size "):], "size %d > limit %d", &n, &limit); serr == nil && n > 0 {
			size = n
		}
		pos := k.pos[p]
		k.pos[p] = pos + 1
		return Record{Partition: strconv.Itoa(int(p)), Position: pos, Oversize: size}, true, nil
	}
	return Record{}, false, nil
}

// caughtUp: every partition's next offset is at its known high watermark.
func (k *KafkaReader) caughtUp() bool {
	for p, o := range k.pos {
		if e, ok := k.ends[strconv.Itoa(int(p))]; !ok || o < e {
			return false
		}
	}
	return true
}

func (k *KafkaReader) clientOpts(consume map[string]map[int32]kgo.Offset) []kgo.Opt {
	b := k.bounds()
	opts := []kgo.Opt{kgo.SeedBrokers(k.spec.Brokers...), kgo.DialTimeout(5 * time.Second), kgo.RequestRetries(3),
		// One fetch in flight or buffered, of at most b.fetch bytes.
		kgo.BrokerMaxReadBytes(b.response), kgo.MaxDecompressBatchBytes(b.decompress),
		kgo.FetchMaxBytes(b.fetch), kgo.FetchMaxPartitionBytes(b.fetch), kgo.MaxConcurrentFetches(1), kgo.DisableFetchSessions()}
	if consume != nil {
		opts = append(opts, kgo.ConsumePartitions(consume), kgo.ConsumeResetOffset(kgo.NoResetOffset()),
			kgo.FetchMaxWait(min(max(k.spec.MaxWait, 10*time.Millisecond), 5*time.Second)))
	}
	return append(opts, k.opts...)
}

// Identity returns the topic's ID (hex), "" when the broker gives none
// (before Kafka 2.8).
func (k *KafkaReader) Identity(ctx context.Context) (string, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	admin := k.cl
	if admin == nil {
		cl, err := kgo.NewClient(k.clientOpts(nil)...)
		if err != nil {
			return "", fmt.Errorf("kafka %v: %w", k.spec.Brokers, err)
		}
		defer cl.Close()
		admin = cl
	}
	_, id, err := k.metadata(ctx, admin)
	return id, err
}

// partitions lists the topic's partitions.
func (k *KafkaReader) partitions(ctx context.Context, cl *kgo.Client) ([]int32, error) {
	parts, _, err := k.metadata(ctx, cl)
	return parts, err
}

// metadata reads the topic's partitions and ID.
func (k *KafkaReader) metadata(ctx context.Context, cl *kgo.Client) ([]int32, string, error) {
	req := kmsg.NewPtrMetadataRequest()
	t := kmsg.NewMetadataRequestTopic()
	t.Topic = kmsg.StringPtr(k.spec.Topic)
	req.Topics = append(req.Topics, t)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return nil, "", fmt.Errorf("kafka %v: metadata of topic %q: %w", k.spec.Brokers, k.spec.Topic, err)
	}
	var parts []int32
	id := ""
	for _, rt := range resp.Topics {
		if err := kerr.ErrorForCode(rt.ErrorCode); err != nil {
			return nil, "", fmt.Errorf("kafka %v: topic %q: %w", k.spec.Brokers, k.spec.Topic, err)
		}
		if rt.TopicID != [16]byte{} {
			id = hex.EncodeToString(rt.TopicID[:])
		}
		k.topicID = rt.TopicID
		k.leaders = map[int32]int32{}
		for _, p := range rt.Partitions {
			parts = append(parts, p.Partition)
			k.leaders[p.Partition] = p.Leader
		}
	}
	slices.Sort(parts)
	return parts, id, nil
}

// listOffsets asks each partition's earliest (ts -2) or end (ts -1) offset.
func (k *KafkaReader) listOffsets(ctx context.Context, cl *kgo.Client, parts []int32, ts int64) (map[int32]int64, error) {
	req := kmsg.NewPtrListOffsetsRequest()
	t := kmsg.NewListOffsetsRequestTopic()
	t.Topic = k.spec.Topic
	for _, p := range parts {
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Partition = p
		rp.Timestamp = ts
		rp.CurrentLeaderEpoch = -1
		t.Partitions = append(t.Partitions, rp)
	}
	req.Topics = append(req.Topics, t)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return nil, fmt.Errorf("kafka %v: list offsets of %q: %w", k.spec.Brokers, k.spec.Topic, err)
	}
	out := map[int32]int64{}
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			if err := kerr.ErrorForCode(rp.ErrorCode); err != nil {
				return nil, fmt.Errorf("kafka %v: list offsets of %s[%d]: %w", k.spec.Brokers, k.spec.Topic, rp.Partition, err)
			}
			out[rp.Partition] = rp.Offset
		}
	}
	for _, p := range parts {
		if _, ok := out[p]; !ok {
			return nil, fmt.Errorf("kafka %v: list offsets of %s[%d]: no answer", k.spec.Brokers, k.spec.Topic, p)
		}
	}
	return out, nil
}

func maps64Equal(a, b map[int32]int64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}
