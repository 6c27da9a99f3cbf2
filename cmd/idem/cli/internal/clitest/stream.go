package clitest

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// KafkaTopic is a kfake cluster (the real Kafka protocol, in process)
// holding one topic of rides.
type KafkaTopic struct {
	t     *testing.T
	Addr  string
	topic string
	cl    *kgo.Client
	c     *kfake.Cluster
}

// Produce writes recs to the topic and waits until they are stored.
func (k *KafkaTopic) Produce(recs ...*kgo.Record) {
	k.t.Helper()
	require.NoError(k.t, k.cl.ProduceSync(context.Background(), recs...).FirstErr())
}

// DeleteBefore deletes partition p's records below offset (retention).
func (k *KafkaTopic) DeleteBefore(p int32, offset int64) {
	k.t.Helper()
	req := kmsg.NewPtrDeleteRecordsRequest()
	rt := kmsg.NewDeleteRecordsRequestTopic()
	rt.Topic = k.topic
	rp := kmsg.NewDeleteRecordsRequestTopicPartition()
	rp.Partition, rp.Offset = p, offset
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	req.TimeoutMillis = 5000
	resp, err := req.RequestWith(context.Background(), k.cl)
	require.NoError(k.t, err)
	require.Zero(k.t, resp.Topics[0].Partitions[0].ErrorCode)
}

// Recreate deletes the topic and creates it again, empty, with the given
// number of partitions (a new topic ID under the same name). The broker
// serves no other request between the delete and the create (both run
// inside the control of the test's CreateTopics request), so a reader
// never finds the topic missing, as it would for a moment on a real
// cluster (a reader that does ends with exit 1).
func (k *KafkaTopic) Recreate(partitions int32) {
	k.t.Helper()
	done := make(chan error, 1)
	k.c.ControlKey(int16(kmsg.CreateTopics), func(req kmsg.Request) (kmsg.Response, error, bool) {
		done <- errors.Join(k.c.DeleteTopic(k.topic), k.c.CreateTopic(k.topic, partitions, nil))
		resp := req.ResponseKind().(*kmsg.CreateTopicsResponse)
		rt := kmsg.NewCreateTopicsResponseTopic()
		rt.Topic = k.topic
		resp.Topics = append(resp.Topics, rt)
		return resp, nil, true
	})
	create := kmsg.NewPtrCreateTopicsRequest()
	ct := kmsg.NewCreateTopicsRequestTopic()
	ct.Topic, ct.NumPartitions, ct.ReplicationFactor = k.topic, partitions, 1
	create.Topics = append(create.Topics, ct)
	create.TimeoutMillis = 5000
	_, err := create.RequestWith(context.Background(), k.cl)
	require.NoError(k.t, err)
	require.NoError(k.t, <-done)
	k.newProducer() // its cached metadata names the old topic
}

// TopicID is the topic's ID, in hex as idem records it.
func (k *KafkaTopic) TopicID() string {
	k.t.Helper()
	info := k.c.TopicInfo(k.topic)
	require.NotNil(k.t, info)
	return hex.EncodeToString(info.TopicID[:])
}

// HoldReads makes the broker hold every ListOffsets request (how idem
// learns where each partition starts and ends before it reads) until
// release is called: what is produced in between is in the log before any
// read is planned.
func (k *KafkaTopic) HoldReads() (release func()) {
	held := make(chan struct{})
	var released atomic.Bool
	k.c.ControlKey(int16(kmsg.ListOffsets), func(kmsg.Request) (kmsg.Response, error, bool) {
		if released.Load() {
			k.c.DropControl()
		} else {
			k.c.SleepControl(func() { <-held })
		}
		return nil, nil, false
	})
	var once sync.Once
	return func() { once.Do(func() { released.Store(true); close(held) }) }
}

// NextRead returns a channel closed when the broker next serves a
// ListOffsets request: a reader planning its next read.
func (k *KafkaTopic) NextRead() <-chan struct{} {
	seen := make(chan struct{})
	k.c.ControlKey(int16(kmsg.ListOffsets), func(kmsg.Request) (kmsg.Response, error, bool) {
		k.c.DropControl()
		close(seen)
		return nil, nil, false
	})
	return seen
}

// AddPartitions grows the topic to total partitions.
func (k *KafkaTopic) AddPartitions(total int32) {
	k.t.Helper()
	req := kmsg.NewPtrCreatePartitionsRequest()
	rt := kmsg.NewCreatePartitionsRequestTopic()
	rt.Topic, rt.Count = k.topic, total
	req.Topics = append(req.Topics, rt)
	req.TimeoutMillis = 5000
	resp, err := req.RequestWith(context.Background(), k.cl)
	require.NoError(k.t, err)
	require.Zero(k.t, resp.Topics[0].ErrorCode)
	k.newProducer() // its cached metadata has the old partitions
}

// newProducer replaces the producing client with a new one.
func (k *KafkaTopic) newProducer() {
	k.t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(k.Addr), kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(0))
	require.NoError(k.t, err)
	k.t.Cleanup(cl.Close)
	k.cl.Close()
	k.cl = cl
}

// streamJobFile writes a versioned_changes job reading the topic.
func (k *KafkaTopic) JobFile(dir string, extra string) string {
	p := filepath.Join(dir, "rides.toml")
	WriteFile(k.t, p, fmt.Sprintf("name = \"rides\"\npipeline = \"versioned_changes\"\ntransform_version = 1\nschema_version = 1\ndatabase = \"rides.duckdb\"\n[input]\nkind = \"kafka\"\nbrokers = [%q]\ntopic = \"rides\"\nmax_wait = \"300ms\"\n%s[target]\ntable = \"rides\"\n"+DuckdbSection, k.Addr, extra))
	return p
}

// StartKafka starts an in-process Kafka cluster (kfake) with a topic of
// the given number of partitions, closed when the test ends.
func StartKafka(t *testing.T, partitions int) *KafkaTopic {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(int32(partitions), "rides"))
	require.NoError(t, err)
	t.Cleanup(c.Close)
	addr := c.ListenAddrs()[0]
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(0))
	require.NoError(t, err)
	t.Cleanup(cl.Close)
	return &KafkaTopic{t: t, Addr: addr, topic: "rides", cl: cl, c: c}
}

// RideChange is message i of the rides topic: a change of entity e<i%entities>
// at version i+1, in partition entity%partitions so that one entity's changes
// stay in order.
func RideChange(i, entities, partitions int) *kgo.Record {
	e := i % entities
	v := fmt.Sprintf(`{"change_id":"c%d","entity_id":"e%d","source_version":%d,"operation":"upsert","value":"v%d"}`, i, e, i+1, i)
	return &kgo.Record{Topic: "rides", Partition: int32(e % partitions), Value: []byte(v)}
}

// BatchLine is one line of `idem run --follow --json`: a batch's result.
type BatchLine struct {
	Decision  string           `json:"decision"`
	BatchID   string           `json:"batch_id"`
	Snapshot  int64            `json:"snapshot"`
	Records   int              `json:"records"`
	Replayed  int              `json:"replayed"`
	Positions map[string]int64 `json:"positions"`
	Lag       map[string]int64 `json:"lag"`
	Gap       string           `json:"gap"`
	Rejected  []map[string]any `json:"rejected"`
	Deletes   int              `json:"deletes"`
}

// BatchLines decodes each line of stdout as a BatchLine.
func BatchLines(t *testing.T, stdout string) []BatchLine {
	t.Helper()
	var out []BatchLine
	for _, l := range strings.Split(strings.TrimSpace(stdout), "\n") {
		if l == "" {
			continue
		}
		var b BatchLine
		require.NoError(t, json.Unmarshal([]byte(l), &b), l)
		out = append(out, b)
	}
	return out
}

// FoldRides is the target one pass over RideChange 0..n-1 gives: each
// entity at its highest version.
func FoldRides(n, entities int) []string {
	last := map[int]int{}
	for i := range n {
		last[i%entities] = i
	}
	out := make([]string, 0, len(last))
	for e, i := range last {
		out = append(out, fmt.Sprintf("e%d %d v%d", e, i+1, i))
	}
	slices.Sort(out)
	return out
}

// LogEnds is each partition's end offset after RideChange 0..n-1.
func LogEnds(n, entities, partitions int) []int64 {
	out := make([]int64, partitions)
	for i := range n {
		out[(i%entities)%partitions]++
	}
	return out
}
