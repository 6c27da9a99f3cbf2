package source

import (
	"bytes"
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/idem-dev/idem/internal/catalog"
	"github.com/idem-dev/idem/internal/job"
	"github.com/idem-dev/idem/internal/report"
)

// StreamBatch is one batch read from a stream: the records past the
// committed positions, at most [input] max_records, written as one JSONL
// file (a record's value per line) that the run retains like a files input,
// so that rerun replays it unchanged.
type StreamBatch struct {
	// ID names the ranges read, partitions in numeric order:
	// "rides:0:120-199,1:80-140" (topic:partition:first-last).
	ID string
	// From are the committed next positions the batch was read from, and
	// Next the positions after it, for the partitions it read.
	From, Next map[string]int64
	Ranges     []StreamRange
	Records    int
	// Skipped counts records the source replayed below a position already
	// committed or read (a broker replay): they are not in the batch.
	Skipped int
	// Gaps are the gaps the source reported, accepted by --allow-gap.
	Gaps []Gap
	// Pinned are the partitions without a committed position that the
	// batch starts where the reader chose ([input] start) without reading
	// a record there: their positions commit with the batch.
	Pinned []string
	// Rejects are the records that are not one record the pipeline can
	// read (not one JSON object, invalid UTF-8, a field twice or one the
	// pipeline does not read, past max_record_bytes, a tombstone that is
	// no delete): each is a row of no fields in the file, and its outcome
	// is the reject's.
	Rejects []catalog.Reject
	// Deletes counts the tombstones read as a delete row (checkTombstone).
	Deletes int
	// StreamID is the source's identity (StreamIdentity) as read; Reset,
	// when set, says the source is another log than the one the positions
	// were committed from and --allow-gap read it from its start.
	StreamID string
	Reset    string
	File     InputFile // the JSONL file; Path is empty when Records is 0
	// name is the first part of the batch's id (streamName, tagged with
	// the source's identity after a reset).
	name string
	// first and last are the source identities the job's snapshots
	// recorded first and last before this batch (catalog.StreamIdentity).
	first, last string
}

// Committed is what a follower knows of its job's committed stream state:
// the positions (catalog.ReadPositions) and the first and last source
// identity its snapshots recorded (catalog.StreamIdentity), as the batch it
// committed last left them (StreamBatch.After). While it holds the
// database nothing else commits a batch of the job, so its next read
// starts from them instead of reading them again (two statements, each on
// a connection of its own, and a scan of every snapshot of the job); the
// run's transaction still reads the positions and refuses the batch if
// they moved (Stream.Stage), so a stale Committed cannot apply a batch
// twice.
type Committed struct {
	Positions   map[string]int64
	First, Last string
}

// After is the job's committed stream state once b has committed: its
// positions moved to Next, and its source identity the last recorded (the
// first too, when none was before).
func (b *StreamBatch) After() *Committed {
	c := &Committed{Positions: maps.Clone(b.From), First: b.first, Last: b.last}
	if c.Positions == nil {
		c.Positions = map[string]int64{}
	}
	maps.Copy(c.Positions, b.Next)
	if b.StreamID != "" {
		c.Last = b.StreamID
		if c.First == "" {
			c.First = b.StreamID
		}
	}
	return c
}

// Before is the job's committed stream state b was read from.
func (b *StreamBatch) Before() *Committed {
	return &Committed{Positions: maps.Clone(b.From), First: b.first, Last: b.last}
}

// StreamRange is the positions of one partition a batch read.
type StreamRange struct {
	Partition string `json:"partition"`
	First     int64  `json:"first"`
	Last      int64  `json:"last"`
	Records   int    `json:"records"`
}

// GapError is a source that no longer holds records past a committed
// position: the run is refused (exit 3) unless --allow-gap.
type GapError struct {
	Job  string
	Gaps []Gap
}

func (e *GapError) Error() string {
	parts := make([]string, len(e.Gaps))
	for i, g := range e.Gaps {
		parts[i] = fmt.Sprintf("partition %s: committed next position %d, first position the source holds %d (%d records lost)", partitionName(g.Partition), g.From, g.Next, g.Next-g.From)
	}
	return fmt.Sprintf("refused: stream gap for job %s: %s; nothing committed (run with --allow-gap to skip the lost records and log the gap)", e.Job, strings.Join(parts, "; "))
}

// Unwrap makes a gap a refusal (exit 3).
func (e *GapError) Unwrap() error { return report.ErrRefused }

func partitionName(p string) string {
	if p == "" {
		return `""`
	}
	return p
}

// GapNote is how an accepted gap is logged in the run log.
func GapNote(gaps []Gap) string {
	if len(gaps) == 0 {
		return ""
	}
	parts := make([]string, len(gaps))
	for i, g := range gaps {
		parts[i] = fmt.Sprintf("partition %s positions %d-%d (%d records)", partitionName(g.Partition), g.From, g.Next-1, g.Next-g.From)
	}
	return "gap accepted (--allow-gap): the source no longer held " + strings.Join(parts, ", ")
}

// ReadStreamBatch reads job j's next batch from r: it reads the committed
// positions through q, asks r for at most max_records records past them,
// refuses gaps unless allowGap (a *GapError), skips records the source
// replayed below a position committed or already taken, and writes the
// records to a JSONL file in dir. A batch of no records has no file. A
// record that is not one record the pipeline can read is a reject (see
// checkRecord): its line is {} and its outcome the reject's; the batch
// goes on past it.
//
// A source whose identity (a Kafka topic ID) is not the same after the read
// as before it was replaced while it was read (a topic deleted and
// recreated between the check and the offsets listed): what was read may
// be the new log's records at the old log's offsets, so it is dropped and
// the batch read again, which then meets the new identity (refused, or
// read from its start with allowGap).
func ReadStreamBatch(ctx context.Context, q catalog.Querier, j *job.Job, r StreamReader, dir string, allowGap bool) (*StreamBatch, error) {
	return ReadStreamBatchKnown(ctx, q, j, r, dir, allowGap, nil)
}

// ReadStreamBatchKnown is ReadStreamBatch from the committed stream state
// known (a follower's, see Committed) instead of reading it through q; nil
// reads it.
func ReadStreamBatchKnown(ctx context.Context, q catalog.Querier, j *job.Job, r StreamReader, dir string, allowGap bool, known *Committed) (*StreamBatch, error) {
	for try := 1; ; try++ {
		b, err := readStreamBatch(ctx, q, j, r, dir, allowGap, known)
		if err == nil || !errors.Is(err, errIdentityMoved) {
			return b, err
		}
		if try == 3 {
			return nil, fmt.Errorf("read %s: the source's identity changed during each of %d reads in a row (the topic deleted and recreated again and again): %w", streamName(j), try, err)
		}
	}
}

// errIdentityMoved is a read during which the source's identity changed.
var errIdentityMoved = errors.New("the source's identity changed during the read")

func readStreamBatch(ctx context.Context, q catalog.Querier, j *job.Job, r StreamReader, dir string, allowGap bool, known *Committed) (*StreamBatch, error) {
	var from map[string]int64
	var err error
	if known != nil {
		from = maps.Clone(known.Positions)
	} else if from, err = catalog.ReadPositions(ctx, q, j.Name); err != nil {
		return nil, err
	}
	spec := j.Input.Stream
	b := &StreamBatch{From: from, Next: map[string]int64{}, name: streamName(j)}
	// readFrom are the positions read from: the committed ones, or, for a
	// source that is another log than theirs, its start.
	readFrom := from
	if id, ok := r.(StreamIdentity); ok {
		if readFrom, err = checkIdentity(ctx, q, j, id, b, allowGap, known); err != nil {
			return nil, err
		}
	}
	recs, gaps, err := r.Read(ctx, maps.Clone(readFrom), spec.MaxRecords, spec.MaxWait)
	if id, ok := r.(StreamIdentity); ok && b.StreamID != "" {
		// Read again, also after an error: a refusal of offsets may be
		// the new log's.
		now, ierr := id.Identity(ctx)
		if ierr == nil && now != b.StreamID {
			return nil, fmt.Errorf("%w: %s, then %s", errIdentityMoved, b.StreamID, now)
		}
		if err == nil && ierr != nil {
			return nil, fmt.Errorf("read %s: %w", streamName(j), ierr)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", streamName(j), err)
	}
	next := maps.Clone(readFrom)
	var real []Gap
	for _, g := range gaps {
		if n, ok := readFrom[g.Partition]; ok && g.Next > n {
			real = append(real, Gap{Partition: g.Partition, From: n, Next: g.Next})
		}
	}
	if len(real) > 0 && !allowGap {
		return nil, &GapError{Job: j.Name, Gaps: real}
	}
	b.Gaps = real
	ranges := map[string]*StreamRange{}
	rules, err := rulesOf(j)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	for _, rec := range recs {
		if b.Records >= spec.MaxRecords {
			break
		}
		if n, ok := next[rec.Partition]; ok && rec.Position < n {
			b.Skipped++
			continue
		}
		if rec.Position < 0 || rec.Position == math.MaxInt64 {
			// next is Position+1: nothing may wrap.
			return nil, report.Refuse("stream", "read %s: record %s:%d: a position outside 0..%d cannot be recorded (the next position must fit in a signed 64-bit integer)", streamName(j), partitionName(rec.Partition), rec.Position, int64(math.MaxInt64-1))
		}
		line, outcome, why := checkRecord(rec, rules)
		if outcome != "" {
			// A tombstone's bytes are its message key's.
			raw := rec.Value
			if rec.Null {
				raw = rec.Key
			}
			size := len(raw)
			if rec.Oversize > 0 {
				size = rec.Oversize
			}
			b.Rejects = append(b.Rejects, catalog.Reject{Row: int64(b.Records) + 1, Partition: rec.Partition, Position: rec.Position,
				Outcome: outcome, Bytes: size, Prefix: strconv.Quote(string(raw[:min(len(raw), catalog.RejectPrefix)])), Why: why})
			line = []byte("{}")
		} else if rec.Null {
			b.Deletes++
		}
		buf.Write(line)
		buf.WriteByte('\n')
		next[rec.Partition] = rec.Position + 1
		b.Next[rec.Partition] = rec.Position + 1
		rg := ranges[rec.Partition]
		if rg == nil {
			rg = &StreamRange{Partition: rec.Partition, First: rec.Position}
			ranges[rec.Partition] = rg
		}
		rg.Last = rec.Position
		rg.Records++
		b.Records++
	}
	for _, g := range real {
		// The gap's positions are passed over even when no record past it
		// came in this batch.
		if b.Next[g.Partition] < g.Next {
			b.Next[g.Partition] = g.Next
		}
	}
	if b.Reset != "" {
		// Every position of the old log goes, read from or not.
		for p, n := range readFrom {
			if _, ok := b.Next[p]; !ok {
				b.Next[p] = n
			}
		}
	}
	if st, ok := r.(StreamStarts); ok {
		for p, pos := range st.Starts() {
			if _, committed := from[p]; committed {
				continue
			}
			if _, read := b.Next[p]; !read {
				b.Next[p] = pos
				b.Pinned = append(b.Pinned, p)
			}
		}
		slices.SortFunc(b.Pinned, comparePartitions)
	}
	for _, rg := range ranges {
		b.Ranges = append(b.Ranges, *rg)
	}
	slices.SortFunc(b.Ranges, func(x, y StreamRange) int { return comparePartitions(x.Partition, y.Partition) })
	b.ID = batchID(b.name, b.Ranges)
	if b.Records == 0 && len(real) > 0 {
		parts := make([]string, len(real))
		for i, g := range real {
			parts[i] = fmt.Sprintf("%s:%d-%d", g.Partition, g.From, g.Next-1)
		}
		b.ID = b.name + ":gap:" + strings.Join(parts, ",")
	}
	if b.Records == 0 && len(real) == 0 && b.Reset != "" {
		b.ID = b.name + ":reset"
	}
	if b.Records == 0 && len(real) == 0 && b.Reset == "" && len(b.Pinned) > 0 {
		parts := make([]string, len(b.Pinned))
		for i, p := range b.Pinned {
			parts[i] = fmt.Sprintf("%s@%d", p, b.Next[p])
		}
		b.ID = b.name + ":start:" + strings.Join(parts, ",")
	}
	if b.Records == 0 {
		return b, nil
	}
	sum := sha256.Sum256(buf.Bytes())
	hexSum := hex.EncodeToString(sum[:])
	path, err := writeStored(dir, hexSum, buf.Bytes())
	if err != nil {
		return nil, err
	}
	b.File = InputFile{Path: path, SHA256: hexSum, Size: int64(buf.Len())}
	return b, nil
}

// writeStored writes a batch's bytes, whose sha256 is sum, to a new
// temporary file in dir (the store's folder), synced, and links it where
// the store keeps them once the batch commits (RetainedPath): the run's
// retain then finds its copy there (Retain checks its bytes again) instead
// of copying the file. Until a committed idem.inputs row names it, the
// store's sweep (Sweep: after a run that did not commit, at the next open
// after a kill) removes the link, as it removes a copy Retain made. The
// batch's file is the temporary name (the snapshot records its base name,
// never a sha256, which would count as a reference to that input).
func writeStored(dir, sum string, data []byte) (string, error) {
	if err := os.MkdirAll(filepath.Join(dir, sum[:2]), 0o755); err != nil {
		return "", fmt.Errorf("write stream batch: %w", err)
	}
	f, err := os.CreateTemp(dir, tempPrefix+"stream-*.jsonl")
	if err != nil {
		return "", fmt.Errorf("write stream batch: %w", err)
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = os.Remove(f.Name())
		return "", fmt.Errorf("write stream batch %s: %w", f.Name(), err)
	}
	// A copy already there (the same bytes in another batch) is Retain's
	// to check; a link that fails leaves Retain to copy.
	_ = os.Link(f.Name(), filepath.Join(dir, sum[:2], sum))
	return f.Name(), nil
}

// WriteEmpty gives a batch of no records (a gap alone, or partitions
// started without a record) an empty file, so that its positions commit as
// an empty batch.
func (b *StreamBatch) WriteEmpty(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("write stream batch: %w", err)
	}
	f, err := os.CreateTemp(dir, tempPrefix+"stream-*.jsonl")
	if err != nil {
		return fmt.Errorf("write stream batch: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write stream batch: %w", err)
	}
	sum := sha256.Sum256(nil)
	b.File = InputFile{Path: f.Name(), SHA256: hex.EncodeToString(sum[:])}
	return nil
}

// Remove deletes the batch's file (its link in the store stays: the
// store's sweep removes it unless a committed row names it).
func (b *StreamBatch) Remove() {
	if b != nil && b.File.Path != "" {
		_ = os.Remove(b.File.Path)
	}
}

// StreamDir is where a run writes its stream batches: the store's folder,
// where a batch with records is also linked as its retained copy
// (writeStored) and a killed run's leftovers are swept.
func StreamDir(dbPath string) string { return StoreDir(dbPath) }

// streamName is the first part of a stream's batch ids: the Kafka topic,
// or the job's name for an SSE feed.
func streamName(j *job.Job) string {
	if j.Input.Stream.Topic != "" {
		return j.Input.Stream.Topic
	}
	return j.Name
}

func batchID(name string, ranges []StreamRange) string {
	parts := make([]string, len(ranges))
	for i, r := range ranges {
		parts[i] = fmt.Sprintf("%s:%d-%d", r.Partition, r.First, r.Last)
	}
	return name + ":" + strings.Join(parts, ",")
}

// comparePartitions orders partitions numerically when both are numbers
// (Kafka), else as strings.
func comparePartitions(a, b string) int {
	x, errA := strconv.ParseInt(a, 10, 64)
	y, errB := strconv.ParseInt(b, 10, 64)
	if errA == nil && errB == nil {
		switch {
		case x < y:
			return -1
		case x > y:
			return 1
		}
		return 0
	}
	return strings.Compare(a, b)
}

// Stream is the input of a run of one stream batch.
type Stream struct {
	Job   *job.Job
	Batch *StreamBatch
}

// Kind is the stream's kind: "kafka" or "sse".
func (s *Stream) Kind() string { return s.Job.Input.Stream.Kind }

// Resolve gives the batch's file; its digest is the key's input part, and
// the positions after it are committed with the run (Resolved.Positions).
func (s *Stream) Resolve(context.Context) (*Resolved, error) {
	files := []InputFile{s.Batch.File}
	return &Resolved{Files: files, Format: job.FormatJSONL, Digest: Digest(files), Positions: s.Batch.Next, Rejects: s.Batch.Rejects, StreamID: s.Batch.StreamID}, nil
}

// Stage checks, inside the run's transaction, that the committed positions
// are still the ones the batch was read from (else the batch might apply
// twice: refused), and stages the batch's file as view input.
func (s *Stream) Stage(ctx context.Context, tx *sql.Tx, r *Resolved) (*Staged, error) {
	now, err := catalog.ReadPositions(ctx, tx, s.Job.Name)
	if err != nil {
		return nil, err
	}
	if !maps.Equal(now, s.Batch.From) {
		for _, p := range slices.Sorted(maps.Keys(mergeKeys(now, s.Batch.From))) {
			if now[p] != s.Batch.From[p] {
				return nil, report.Refuse("position", "stream position of partition %s moved from %d to %d since batch %s was read; nothing committed: run again to read from the committed position",
					partitionName(p), s.Batch.From[p], now[p], s.Batch.ID)
			}
		}
	}
	j := s.Job
	// checkRecord has judged every record's fields as it read the batch.
	ignored, err := stageInput(ctx, tx, r.Files, r.Format, j.Pipeline.ColumnNames(), j.Input.ExtraColumns == job.ExtraIgnore, true)
	if err != nil {
		return nil, err
	}
	return &Staged{IgnoredColumns: ignored}, nil
}

func mergeKeys(a, b map[string]int64) map[string]int64 {
	out := maps.Clone(a)
	for k, v := range b {
		out[k] = v
	}
	return out
}

// checkIdentity compares the source's identity with the one the job's
// positions were committed from, and returns the positions to read from.
// Another identity under the same name (a Kafka topic deleted and
// recreated) is refused (exit 3), since its offsets say nothing of the old
// log's, unless allowGap: then every partition is read from its start
// (position 0, a gap up to its first record) and b.Reset says so, for the
// run log.
func checkIdentity(ctx context.Context, q catalog.Querier, j *job.Job, r StreamIdentity, b *StreamBatch, allowGap bool, known *Committed) (map[string]int64, error) {
	cur, err := r.Identity(ctx)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", streamName(j), err)
	}
	b.StreamID = cur
	first, prev := "", ""
	if known != nil {
		first, prev = known.First, known.Last
	} else if first, prev, err = catalog.StreamIdentity(ctx, q, j.Name); err != nil {
		return nil, err
	}
	b.first, b.last = first, prev
	if first != "" && cur != "" && cur != first {
		// Batch ids of another log than the job's first name it, so that
		// its offsets are never taken for a batch of the first.
		b.name = streamName(j) + "@" + cur[:min(len(cur), 12)]
	}
	if prev == "" || cur == "" || prev == cur || len(b.From) == 0 {
		return b.From, nil
	}
	parts := make([]string, 0, len(b.From))
	reset := map[string]int64{}
	for _, p := range slices.SortedFunc(maps.Keys(b.From), comparePartitions) {
		parts = append(parts, fmt.Sprintf("%s@%d", p, b.From[p]))
		reset[p] = 0
	}
	if !allowGap {
		return nil, report.Refuse("stream", "kafka topic %q is another log than the one job %s read: its topic ID is %s, and the positions %s were committed from topic ID %s (the topic was deleted and recreated); nothing was read. Run with --allow-gap to read the new topic from its first records, leaving the old positions and any record of the old topic past them, or give the job a new name",
			streamName(j), j.Name, cur, strings.Join(parts, ", "), prev)
	}
	b.Reset = fmt.Sprintf("topic recreated (--allow-gap): topic ID %s, not %s; positions %s left for the new topic's first records (records of the old topic past them or in a partition without a position, if any, and of any topic created and deleted in between, were not read)", cur, prev, strings.Join(parts, ", "))
	return reset, nil
}
