package source

import (
	"context"
	"fmt"
	"time"

	"github.com/idem-dev/idem/internal/job"
)

// A stream input ([input] kind = "kafka" or "sse") reads records from a
// source partitioned into ordered logs: a Kafka topic's partitions, or an
// SSE feed (one partition, named ""). idem keeps, per source partition, the
// position of the next record to read, in its own table, committed in the
// same transaction as the batch's rows; the broker's or server's idea of
// where a reader is is never the truth.
//
// A StreamReader is the part of a stream input that talks to the source:
// the kind-specific client. The stream input around it (positions, the
// batch id from the ranges read, skipping replays, refusing gaps, writing
// the batch as a retained JSONL file that rerun replays) is the same for
// every kind.

// A Record is one message of a stream: the source partition it came from,
// its position in that partition (a Kafka offset; an SSE event id, which
// must be an integer that increases along the feed) and its value, one
// JSON object.
type Record struct {
	Partition string
	Position  int64
	Value     []byte
	// Null is a record with no value at all (a Kafka tombstone).
	Null bool
	// Key is a Kafka message's key: what a tombstone deletes (see
	// checkRecord).
	Key []byte
	// Oversize, when not 0, is the record's length in bytes: it was past
	// what the reader holds, and Value is only its first bytes.
	Oversize int
	// Skipped is an SSE event of a type that [input] events does not
	// select: it holds its position, and its outcome is skipped_event; its
	// data is not kept.
	Skipped bool
}

// A Gap is a stretch of positions of a partition that the source no longer
// holds (records deleted by retention before idem read them): the first
// position the source can give is Next, above the committed From.
type Gap struct {
	Partition string
	From      int64 // the committed next position
	Next      int64 // the first position the source holds
}

// StreamReader reads one stream's records.
type StreamReader interface {
	// Read returns at most max records at or past next: for each partition,
	// the records with Position >= next[partition] (a partition missing
	// from next starts at its earliest record, or at its end when the
	// input says start = "latest"). It returns once max records are read,
	// or maxWait after the first call began, or when ctx ends (with the
	// records read so far and no error when some were read). Records of
	// one partition come in position order. A reader may return records
	// below next (a source replaying); the caller skips them. Gaps reports
	// partitions whose first available position is above next.
	Read(ctx context.Context, next map[string]int64, max int, maxWait time.Duration) (records []Record, gaps []Gap, err error)
	// Close releases the connection.
	Close() error
}

// StreamStopper is implemented by a reader whose source can say that it
// has nothing more to send (an SSE server answering 204): a follow run
// ends, without error, once such a reader has given its last record.
type StreamStopper interface {
	Stopped() bool
}

// StreamEnds is implemented by a reader that knows where each partition's
// log ends (the position after its last record), for the lag a follow run
// shows; it returns what it last learned, or nil.
type StreamEnds interface {
	Ends(ctx context.Context) map[string]int64
}

// StreamStarts is implemented by a reader that chooses where a partition
// without a committed position starts ([input] start): Starts returns the
// positions its last Read chose, so that the batch commits them even when
// it read nothing there, and nothing produced afterwards is skipped.
type StreamStarts interface {
	Starts() map[string]int64
}

// StreamIdentity is implemented by a reader whose source has an identity
// beside its name (a Kafka topic's ID): another identity under the same
// name is another log, whose positions say nothing of the one a job
// committed from. "" when the source gives none.
type StreamIdentity interface {
	Identity(ctx context.Context) (string, error)
}

// OpenStream opens the reader of job j's stream input.
func OpenStream(j *job.Job) (StreamReader, error) {
	switch j.Input.Stream.Kind {
	case job.KindKafka:
		return NewKafkaReader(j.Input.Stream)
	case job.KindSSE:
		// A connection that sends nothing (not even a comment) for a
		// minute is taken as dead and reopened from the last event read.
		return NewSSEReader(j.Input.Stream.URL, SSEOptions{IdleTimeout: time.Minute, Events: j.Input.Stream.Events, MaxEvent: j.Input.Stream.MaxRecordBytes}), nil
	default:
		return nil, fmt.Errorf("job %s: no reader for stream kind %q", j.Name, j.Input.Stream.Kind)
	}
}
