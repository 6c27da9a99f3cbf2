package job

import (
	"strings"
	"time"

	"github.com/BurntSushi/toml"
	"github.com/idem-dev/idem/internal/jobfs"
	"github.com/idem-dev/idem/internal/pipeline"
)

// Stream input kinds ([input] kind). Files stay the default (kind absent).
const (
	KindKafka = "kafka"
	KindSSE   = "sse"
)

// Where a stream partition with no committed position starts ([input]
// start).
const (
	StartEarliest = "earliest"
	StartLatest   = "latest"
)

// Stream defaults.
const (
	DefaultMaxRecords = 10000
	DefaultMaxWait    = 2 * time.Second
)

// StreamSpec is the stream part of [input]: kind = "kafka" or "sse". Only
// Kind, Topic and the format shape the rows a batch lands, so only they are
// in the job key's config part (see extendConfig); brokers, url, max_wait,
// max_records and start say where and how fast to read, and where a
// partition never read starts: the positions read are in the input part.
type StreamSpec struct {
	Kind       string // KindKafka or KindSSE; "" for files
	Brokers    []string
	Topic      string
	URL        string
	MaxRecords int
	MaxWait    time.Duration
	Start      string // StartEarliest (default) or StartLatest
	// MaxRecordBytes bounds one record: a longer one is an outcome
	// invalid_too_large, not a row (default DefaultMaxRecordBytes).
	MaxRecordBytes int
	// Events, for an SSE input, are the event types that are records
	// (empty: every event); others are passed over and counted.
	Events []string
}

// DefaultMaxRecordBytes is [input] max_record_bytes when not set: 8 MiB.
const DefaultMaxRecordBytes = 8 << 20

// IsStream says whether the job reads a stream ([input] kind set).
func (j *Job) IsStream() bool { return j.Input.Stream.Kind != "" }

// streamTable holds the stream keys of the job file's [input] table.
type streamTable struct {
	Kind       string   `toml:"kind"`
	Brokers    []string `toml:"brokers"`
	Topic      string   `toml:"topic"`
	URL        string   `toml:"url"`
	MaxRecords *int     `toml:"max_records"`
	MaxWait    string   `toml:"max_wait"`
	Start      string   `toml:"start"`
	// MaxRecordBytes and Events: see StreamSpec.
	MaxRecordBytes *int     `toml:"max_record_bytes"`
	Events         []string `toml:"events"`
}

// applyStream validates the stream keys of [input]. A stream feeds an
// apply pipeline only: each batch is a new set of change records, and a
// refresh pipeline would replace its target with the last batch alone.
// Errors are *JobFileError naming the key.
func (j *Job) applyStream(data []byte, md toml.MetaData, jf *jobFile) error {
	bad := jobfs.KeyErrors(j.File, data)
	in := jf.Input
	s := in.streamTable
	if s.Kind == "" {
		for _, k := range []string{"brokers", "topic", "url", "max_records", "max_wait", "start", "max_record_bytes", "events"} {
			if md.IsDefined("input", k) {
				return bad("input."+k, "%s applies to a stream input: set kind = %q or %q", k, KindKafka, KindSSE)
			}
		}
		return nil
	}
	spec := StreamSpec{Kind: s.Kind, Brokers: s.Brokers, Topic: s.Topic, URL: s.URL, MaxRecords: DefaultMaxRecords, MaxWait: DefaultMaxWait, Start: StartEarliest, MaxRecordBytes: DefaultMaxRecordBytes}
	switch s.Kind {
	case KindKafka:
		if len(s.Brokers) == 0 {
			return bad("input.brokers", "a kafka input needs brokers = [\"host:port\", ...]")
		}
		for _, b := range s.Brokers {
			if strings.TrimSpace(b) == "" || !strings.Contains(b, ":") {
				return bad("input.brokers", "broker %q is not host:port", b)
			}
		}
		if s.Topic == "" {
			return bad("input.topic", "a kafka input needs topic = \"...\"")
		}
		if s.URL != "" {
			return bad("input.url", "url applies to kind = %q; a kafka input names brokers and a topic", KindSSE)
		}
		if md.IsDefined("input", "events") {
			return bad("input.events", "events applies to kind = %q (the event types that are records); a kafka topic's records have no type", KindSSE)
		}
	case KindSSE:
		if s.URL == "" {
			return bad("input.url", "an sse input needs url = \"http://...\"")
		}
		if !strings.HasPrefix(s.URL, "http://") && !strings.HasPrefix(s.URL, "https://") {
			return bad("input.url", "must be an http:// or https:// URL (got %q)", s.URL)
		}
		if len(s.Brokers) > 0 || s.Topic != "" {
			key := "input.brokers"
			if s.Topic != "" {
				key = "input.topic"
			}
			return bad(key, "brokers and topic apply to kind = %q; an sse input names a url", KindKafka)
		}
	default:
		return bad("input.kind", "must be %q or %q, or absent for files (got %q)", KindKafka, KindSSE, s.Kind)
	}
	if j.Pipeline.Mode != pipeline.ModeApply {
		return bad("input.kind", "a stream input needs an apply pipeline (each batch is a set of changes applied once); %s is a %s pipeline, which would replace its target with the last batch alone", j.Pipeline.Name, j.Pipeline.Mode)
	}
	switch {
	case in.Path != "":
		return bad("input.path", "a stream input reads its %s, not files: remove path", map[string]string{KindKafka: "topic", KindSSE: "url"}[s.Kind])
	case len(in.Upstream) > 0:
		return bad("input.upstream", "a stream input and upstream jobs do not combine")
	case in.Mode != "":
		return bad("input.mode", "a stream input and mode = %q do not combine", in.Mode)
	case md.IsDefined("input", "chunk_rows") || in.Watermark != "":
		return bad("input.chunk_rows", "a stream input is read in batches of max_records; chunk_rows does not apply")
	}
	if f := strings.ToLower(in.Format); f != "" && f != FormatJSONL {
		return bad("input.format", "a stream input reads format = %q (each record one JSON object; got %q)", FormatJSONL, in.Format)
	}
	if s.MaxRecords != nil {
		if *s.MaxRecords < 1 {
			return bad("input.max_records", "must be a positive number of records (got %d)", *s.MaxRecords)
		}
		spec.MaxRecords = *s.MaxRecords
	}
	if s.MaxWait != "" {
		d, err := time.ParseDuration(s.MaxWait)
		if err != nil || d <= 0 {
			return bad("input.max_wait", "must be a positive duration such as \"2s\" or \"500ms\" (got %q)", s.MaxWait)
		}
		spec.MaxWait = d
	}
	if s.MaxRecordBytes != nil {
		if *s.MaxRecordBytes < 1 || *s.MaxRecordBytes > 1<<30 {
			return bad("input.max_record_bytes", "must be between 1 and %d bytes (got %d)", 1<<30, *s.MaxRecordBytes)
		}
		spec.MaxRecordBytes = *s.MaxRecordBytes
	}
	for _, e := range s.Events {
		if strings.TrimSpace(e) == "" || strings.ContainsAny(e, "\r\n") {
			return bad("input.events", "an event type must be non-empty text on one line (got %q)", e)
		}
	}
	spec.Events = s.Events
	switch s.Start {
	case "":
	case StartEarliest, StartLatest:
		spec.Start = s.Start
	default:
		return bad("input.start", "must be %q or %q (got %q)", StartEarliest, StartLatest, s.Start)
	}
	j.Input.Stream = spec
	j.Input.Format = FormatJSONL
	return nil
}
